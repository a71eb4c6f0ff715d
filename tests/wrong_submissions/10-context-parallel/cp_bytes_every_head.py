"""Gathers K and V for every query head, as if there were no grouped-query attention.

replaces: cp_plan
fails: test_cp_plan test_cp_plan_more
says: not only grouped-query attention's kv_heads
"""


def cp_bytes_per_layer(spec):
    cp = spec["cp"]
    heads = spec["heads"] // spec["tp"]
    gathered = 2 * spec["seq"] * spec["micro_batch"] * heads * spec["hidden"] // spec["heads"] * 2
    return (3 if spec["recompute"] == "full" else 2) * (cp - 1) / cp * gathered
