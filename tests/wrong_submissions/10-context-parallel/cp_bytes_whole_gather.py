"""Counts the whole gathered K and V as sent, not the (cp - 1)/cp a ring brings each rank.

replaces: cp_plan
fails: test_cp_plan test_cp_plan_more
says: count the whole gathered K and V
"""


def cp_bytes_per_layer(spec):
    kv = max(spec["kv_heads"] // spec["tp"], 1)
    gathered = 2 * spec["seq"] * spec["micro_batch"] * kv * spec["hidden"] // spec["heads"] * 2
    return (3 if spec["recompute"] == "full" else 2) * gathered if spec["cp"] > 1 else 0.0
