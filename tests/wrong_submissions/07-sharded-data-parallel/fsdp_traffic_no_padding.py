"""Counts the layers' parameters as they are, leaving out the padding of rows that do not divide.

replaces: fsdp_traffic
fails: test_fsdp_traffic test_fsdp_traffic_more
says: leave out the padding
"""


def fully_shard_traffic(layers, world_size, reshard_after_forward):
    if world_size == 1:
        return {"all_gather": (0, 0), "reduce_scatter": (0, 0)}
    total = sum(out_f * in_f + out_f for out_f, in_f in layers)
    times = 2 if reshard_after_forward else 1
    return {"all_gather": (times * len(layers), times * total), "reduce_scatter": (len(layers), total)}
