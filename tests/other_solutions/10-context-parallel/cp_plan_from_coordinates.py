"""The CP group from full mesh coordinates, in Llama 3's order; bytes in units of K and V elements.

replaces: cp_plan
fails: none
"""

import itertools


def cp_group(rank, sizes):
    order = ("tp", "cp", "pp", "dp")
    coords, rest = {}, rank
    for axis in order:
        coords[axis] = rest % sizes[axis]
        rest //= sizes[axis]

    def rank_of(c):
        r = 0
        for axis in reversed(order):
            r = r * sizes[axis] + c[axis]
        return r

    return [rank_of({**coords, "cp": i}) for i in itertools.islice(itertools.count(), sizes["cp"])]


def cp_bytes_per_layer(spec):
    if spec["cp"] == 1:
        return 0
    per_token = 2 * max(1, spec["kv_heads"] // spec["tp"]) * (spec["hidden"] // spec["heads"])  # K and V
    elements = per_token * spec["seq"] * spec["micro_batch"]
    collectives = 2 + (spec["recompute"] == "full")
    return 2.0 * elements * collectives * (spec["cp"] - 1) / spec["cp"]
