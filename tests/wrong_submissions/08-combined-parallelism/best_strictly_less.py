"""Takes a layout that needs exactly the GPU's memory as not fitting.

replaces: best
fails: test_best
says: a layout fits when it needs at most that
"""


def best_config(candidates, predict):
    fitting = [c for c in candidates if predict(c)["memory_bytes"] < c["hbm"]]
    return min(fitting, key=lambda c: (predict(c)["step_seconds"], predict(c)["memory_bytes"]), default=None)
