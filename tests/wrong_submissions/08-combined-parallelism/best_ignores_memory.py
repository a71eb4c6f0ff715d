"""Picks the fastest candidate, whether or not it fits.

replaces: best
fails: test_best
says: which does not fit in 80 GB
"""


def best_config(model, cluster, candidates, memory, time):
    return min(candidates, key=lambda c: time(model, cluster, c), default=None)
