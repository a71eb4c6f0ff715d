"""Returns a percentage (40) where a fraction (0.4) is asked for.

replaces: mfu
fails: test_mfu
says: not a percentage
"""


def mfu(spec, seconds):
    h, kv = spec["hidden"], spec["hidden"] * spec["kv_heads"] // spec["heads"]
    gated = spec.get("gated_mlp", spec["ffn_hidden"] != 4 * h)
    block = 2 * h * h + 2 * h * kv + (3 if gated else 2) * h * spec["ffn_hidden"]
    per_token = 6 * (spec["layers"] * block + spec["vocab"] * h) + 6 * spec["layers"] * spec["seq"] * h
    gpus = spec["dp"] * spec["tp"] * spec["pp"] * spec["cp"]
    return 100 * per_token * spec["global_batch"] * spec["seq"] / (gpus * spec["peak_flops"] * seconds)
