"""Picks the fastest layout that fits, but among equally fast ones keeps the first listed, not the
one that needs the least memory.

replaces: best
fails: test_best
says: among equally fast layouts
"""


def best_config(model, cluster, candidates, memory, time):
    fits = [c for c in candidates if memory(model, cluster, c) <= cluster.hbm]
    if not fits:
        return None
    return min(fits, key=lambda c: time(model, cluster, c))
