"""Counts the recomputed forward, which is hardware FLOPs utilisation, not MFU.

replaces: mfu
fails: test_mfu
says: not the recomputation's
"""


def mfu(spec, seconds):
    h, kv = spec["hidden"], spec["hidden"] * spec["kv_heads"] // spec["heads"]
    gated = spec.get("gated_mlp", spec["ffn_hidden"] != 4 * h)
    block = 2 * h * h + 2 * h * kv + (3 if gated else 2) * h * spec["ffn_hidden"]
    matrices = spec["layers"] * block + spec["vocab"] * h
    attention = 6 * spec["layers"] * spec["seq"] * h
    per_token = 6 * matrices + attention
    if spec["recompute"] == "full":
        per_token += 2 * matrices + attention / 3
    gpus = spec["dp"] * spec["tp"] * spec["pp"] * spec["cp"]
    return per_token * spec["global_batch"] * spec["seq"] / (gpus * spec["peak_flops"] * seconds)
