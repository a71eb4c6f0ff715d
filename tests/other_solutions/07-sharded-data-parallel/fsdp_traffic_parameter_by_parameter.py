"""Walks the parameters (weight, then bias) of each layer, padding each one's rows with math.ceil,
and adds the collectives up one unit at a time.

replaces: fsdp_traffic
fails: none
"""

import math


def fully_shard_traffic(layers, world_size, reshard_after_forward):
    gathers = scatters = gathered = scattered = 0
    if world_size > 1:
        for out_features, in_features in layers:
            shapes = [(out_features, in_features), (out_features,)]
            unit = sum(math.ceil(s[0] / world_size) * world_size * math.prod(s[1:]) for s in shapes)
            for _ in range(1 if not reshard_after_forward else 2):
                gathers, gathered = gathers + 1, gathered + unit
            scatters, scattered = scatters + 1, scattered + unit
    return {"all_gather": (gathers, gathered), "reduce_scatter": (scatters, scattered)}
