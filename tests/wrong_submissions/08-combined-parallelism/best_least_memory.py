"""Picks the layout that needs the least memory instead of the fastest that fits.

replaces: best
fails: test_best
says: not the fastest that does
"""


def best_config(candidates, predict):
    fitting = [c for c in candidates if predict(c)["memory_bytes"] <= c["hbm"]]
    return min(fitting, key=lambda c: predict(c)["memory_bytes"], default=None)
