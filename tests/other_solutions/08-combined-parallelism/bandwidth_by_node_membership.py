"""Finds rank 0's group of the axis by coordinates, and counts its members in node 0.

replaces: bandwidth
fails: none
"""


def group_bandwidth(spec, axis):
    sizes = [spec[a] for a in ("tp", "cp", "pp", "dp")]
    position = ("tp", "cp", "pp", "dp").index(axis)
    stride = 1
    for size in sizes[:position]:
        stride *= size
    members = [i * stride for i in range(spec[axis])]  # rank 0's group
    nodes = {r // spec["gpus_per_node"] for r in members}
    if len(nodes) == 1:
        return float(spec["nvlink"])
    in_node_0 = sum(1 for r in members if r < spec["gpus_per_node"])
    return float(min(spec["nvlink"], in_node_0 * spec["network"]))
