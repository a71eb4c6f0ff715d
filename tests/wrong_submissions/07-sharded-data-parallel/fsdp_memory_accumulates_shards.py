"""Keeps only a gradient shard between micro-batches even when they are not reduced, as if each rank
could keep its part of gradients no reduce_scatter has summed.

replaces: fsdp_memory
fails: test_fsdp_memory_more
says: count sharded gradients, though without a reduce_scatter
"""


def fully_shard_memory(layers, world_size, reshard_after_forward, sync_each_micro_batch):
    units = [o * i + o for o, i in layers]
    shard = sum(-(-o // world_size) * (i + 1) for o, i in layers)
    whole = (
        max([a + b for a, b in zip(units, units[1:], strict=False)] or units)
        if reshard_after_forward
        else sum(units)
    )
    return {"states": 12 * shard, "gradients": 4 * shard, "whole_parameters": 2 * whole}
