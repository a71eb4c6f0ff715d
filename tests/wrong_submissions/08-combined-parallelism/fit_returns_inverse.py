"""Returns the fit's unknown x = 1/e instead of the efficiency.

replaces: fit
fails: test_fit
says: you returned 1/e
"""


def fit_efficiency(runs):
    return sum(r["at_peak"] * (r["seconds"] - r["rest"]) for r in runs) / sum(r["at_peak"] ** 2 for r in runs)
