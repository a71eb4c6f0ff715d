"""Picks the fastest layout, fitting or not.

replaces: best
fails: test_best
says: more than the GPU's memory
"""


def best_config(candidates, predict):
    return min(candidates, key=lambda c: predict(c)["step_seconds"], default=None)
