"""Counts two neighbouring units whole even with reshard_after_forward=False, which keeps every
unit whole from its forward to its backward.

replaces: fsdp_memory
fails: test_fsdp_memory_more
says: free the units after forward
"""


def fully_shard_memory(layers, world_size, reshard_after_forward, sync_each_micro_batch):
    units = [o * i + o for o, i in layers]
    shard = sum(-(-o // world_size) * (i + 1) for o, i in layers)
    whole = max([a + b for a, b in zip(units, units[1:], strict=False)] or units)
    gradients = 4 * shard if sync_each_micro_batch else 4 * sum(units)
    return {"states": 12 * shard, "gradients": gradients, "whole_parameters": 2 * whole}
