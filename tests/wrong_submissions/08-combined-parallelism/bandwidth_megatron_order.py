"""Lays DP inside PP (Megatron-LM's order), not the notebook's TP, CP, PP, DP.

replaces: bandwidth
fails: test_bandwidth_more
says: TP innermost, then CP, then PP, then DP
"""

import math


def group_bandwidth(spec, axis):
    order = ("tp", "cp", "dp", "pp")
    stride = math.prod(spec[a] for a in order[: order.index(axis)])
    if stride * spec[axis] <= spec["gpus_per_node"]:
        return spec["nvlink"]
    return min(spec["nvlink"], max(1, spec["gpus_per_node"] // stride) * spec["network"])
