"""Counts the collectives on one rank too, where fully_shard has nobody to send to and issues none.

replaces: fsdp_traffic
fails: test_fsdp_traffic_more
says: On one rank, fully_shard has no other rank
"""


def fully_shard_traffic(layers, world_size, reshard_after_forward):
    total = sum(-(-out_f // world_size) * world_size * (in_f + 1) for out_f, in_f in layers)
    times = 2 if reshard_after_forward else 1
    return {"all_gather": (times * len(layers), times * total), "reduce_scatter": (len(layers), total)}
