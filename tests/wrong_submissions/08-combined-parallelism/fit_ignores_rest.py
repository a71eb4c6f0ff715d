"""Fits the whole reported step to the matmuls, as if the rest of the step were compute too.

replaces: fit
fails: test_fit
says: subtract it before fitting
"""


def fit_efficiency(runs):
    return sum(r["at_peak"] ** 2 for r in runs) / sum(r["at_peak"] * r["seconds"] for r in runs)
