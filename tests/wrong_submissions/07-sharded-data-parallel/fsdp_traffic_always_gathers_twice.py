"""Gathers each unit twice whatever reshard_after_forward says.

replaces: fsdp_traffic
fails: test_fsdp_traffic_more
says: gather each unit again in backward, though it was never freed
"""


def fully_shard_traffic(layers, world_size, reshard_after_forward):
    if world_size == 1:
        return {"all_gather": (0, 0), "reduce_scatter": (0, 0)}
    total = sum(-(-out_f // world_size) * world_size * (in_f + 1) for out_f, in_f in layers)
    return {"all_gather": (2 * len(layers), 2 * total), "reduce_scatter": (len(layers), total)}
