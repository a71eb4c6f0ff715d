"""Picks the candidate that needs the least memory, not the fastest that fits.

replaces: best
fails: test_best
says: It needs the least memory of those that fit
"""


def best_config(model, cluster, candidates, memory, time):
    fitting = [c for c in candidates if memory(model, cluster, c) <= cluster.hbm]
    return min(fitting, key=lambda c: memory(model, cluster, c), default=None)
