"""The best layout by sorting every candidate by (time, memory) and taking the first that fits.

replaces: best
fails: none
"""


def best_config(candidates, predict):
    plans = sorted(
        (predict(c)["step_seconds"], predict(c)["memory_bytes"], i) for i, c in enumerate(candidates)
    )
    for _, memory, i in plans:
        if memory <= candidates[i]["hbm"]:
            return candidates[i]
    return None
