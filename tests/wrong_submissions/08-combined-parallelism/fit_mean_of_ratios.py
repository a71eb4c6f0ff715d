"""Averages each run's own efficiency instead of fitting the seconds.

replaces: fit
fails: test_fit
says: not the efficiency of each run averaged
"""


def fit_efficiency(runs):
    return sum(r["at_peak"] / (r["seconds"] - r["rest"]) for r in runs) / len(runs)
