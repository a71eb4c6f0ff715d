"""Counts one whole unit at a time when resharding, forgetting the unit being prefetched while
another computes.

replaces: fsdp_memory
fails: test_fsdp_memory test_fsdp_memory_more
says: prefetching brings the next unit in
"""


def fully_shard_memory(layers, world_size, reshard_after_forward, sync_each_micro_batch):
    units = [o * i + o for o, i in layers]
    shard = sum(-(-o // world_size) * (i + 1) for o, i in layers)
    whole = max(units) if reshard_after_forward else sum(units)
    gradients = 4 * shard if sync_each_micro_batch else 4 * sum(units)
    return {"states": 12 * shard, "gradients": gradients, "whole_parameters": 2 * whole}
