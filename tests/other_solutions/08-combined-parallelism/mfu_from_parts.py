"""MFU from named parts: attention's full square, halved for the causal mask.

replaces: mfu
fails: none
"""


def mfu(spec, seconds):
    h = spec["hidden"]
    head = h // spec["heads"]
    q_and_out = 2 * h * h
    k_and_v = 2 * h * spec["kv_heads"] * head
    mlp = (3 if spec.get("gated_mlp", spec["ffn_hidden"] != 4 * h) else 2) * h * spec["ffn_hidden"]
    tokens = spec["global_batch"] * spec["seq"]
    flops = 3 * 2 * tokens * (spec["layers"] * (q_and_out + k_and_v + mlp) + spec["vocab"] * h)
    flops += 3 * spec["layers"] * tokens * (4 * spec["seq"] * h) / 2  # QK^T and PV, causal
    return flops / (spec["dp"] * spec["tp"] * spec["pp"] * spec["cp"] * spec["peak_flops"] * seconds)
