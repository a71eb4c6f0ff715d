"""Lets k NICs carry more than NVLink: TP 16 over two nodes at 8 x 50 GB/s is fine, but 8 x 400 is not.

replaces: bandwidth
fails: test_bandwidth_more
says: cap at NVLink
"""

import math


def group_bandwidth(spec, axis):
    order = ("tp", "cp", "pp", "dp")
    stride = math.prod(spec[a] for a in order[: order.index(axis)])
    if stride * spec[axis] <= spec["gpus_per_node"]:
        return spec["nvlink"]
    return max(1, spec["gpus_per_node"] // stride) * spec["network"]
