"""Counts everything from the layers, without calling fully_shard_traffic: rows padded to a
multiple of the world size, two gathers when resharding, nothing on one rank.

replaces: fsdp_bytes
fails: none
"""


def fully_shard_bytes(layers, world_size, reshard_after_forward):
    padded = 0 if world_size == 1 else sum(-(-o // world_size) * world_size * (i + 1) for o, i in layers)
    gathers = 2 if reshard_after_forward else 1
    whole = 0 if reshard_after_forward else sum(o * i + o for o, i in layers)
    return {
        "all_gather": gathers * padded * 2,
        "reduce_scatter": padded * 4,
        "whole_after_forward": whole * 2,
    }
