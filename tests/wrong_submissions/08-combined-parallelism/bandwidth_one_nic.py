"""Gives a group across nodes one NIC's bandwidth, as if NCCL ran one ring.

replaces: bandwidth
fails: test_bandwidth test_bandwidth_more
says: one ring per NIC
"""

import math


def group_bandwidth(spec, axis):
    order = ("tp", "cp", "pp", "dp")
    stride = math.prod(spec[a] for a in order[: order.index(axis)])
    return spec["nvlink"] if stride * spec[axis] <= spec["gpus_per_node"] else spec["network"]
