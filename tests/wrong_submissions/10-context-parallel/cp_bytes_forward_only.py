"""Counts only the forward all_gather, not the backward reduce_scatter of the gradients.

replaces: cp_plan
fails: test_cp_plan test_cp_plan_more
says: count only the forward all_gather
"""


def cp_bytes_per_layer(spec):
    cp = spec["cp"]
    kv = max(spec["kv_heads"] // spec["tp"], 1)
    return (cp - 1) / cp * 2 * spec["seq"] * spec["micro_batch"] * kv * spec["hidden"] // spec["heads"] * 2
