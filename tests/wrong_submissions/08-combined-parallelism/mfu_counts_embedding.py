"""Counts the input embedding as a matrix product (6 Psi with every parameter).

replaces: mfu
fails: test_mfu
says: the input embedding is a lookup
"""


def mfu(spec, seconds):
    h, kv = spec["hidden"], spec["hidden"] * spec["kv_heads"] // spec["heads"]
    gated = spec.get("gated_mlp", spec["ffn_hidden"] != 4 * h)
    block = 2 * h * h + 2 * h * kv + (3 if gated else 2) * h * spec["ffn_hidden"]
    matrices = spec["layers"] * block + 2 * spec["vocab"] * h
    per_token = 6 * matrices + 6 * spec["layers"] * spec["seq"] * h
    gpus = spec["dp"] * spec["tp"] * spec["pp"] * spec["cp"]
    return per_token * spec["global_batch"] * spec["seq"] / (gpus * spec["peak_flops"] * seconds)
