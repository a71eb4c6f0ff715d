"""Pads each unit's flat buffer to a multiple of the world size, as FSDP1 and exercise 2 do, where
FSDP2 pads each parameter's rows.

replaces: fsdp_traffic
fails: test_fsdp_traffic test_fsdp_traffic_more
says: pad each unit's flat buffer as a whole
"""


def fully_shard_traffic(layers, world_size, reshard_after_forward):
    if world_size == 1:
        return {"all_gather": (0, 0), "reduce_scatter": (0, 0)}
    total = sum(-(-(out_f * (in_f + 1)) // world_size) * world_size for out_f, in_f in layers)
    times = 2 if reshard_after_forward else 1
    return {"all_gather": (times * len(layers), times * total), "reduce_scatter": (len(layers), total)}
