"""Copies section 1's table: a bf16 copy of the parameters kept between steps beside the fp32
master, sharded.

replaces: fsdp_memory
fails: test_fsdp_memory test_fsdp_memory_more
says: count a bf16 copy of the parameters between steps
"""


def fully_shard_memory(layers, world_size, reshard_after_forward, sync_each_micro_batch):
    units = [o * i + o for o, i in layers]
    shard = sum(-(-o // world_size) * (i + 1) for o, i in layers)
    whole = (
        max([a + b for a, b in zip(units, units[1:], strict=False)] or units)
        if reshard_after_forward
        else sum(units)
    )
    gradients = 4 * shard if sync_each_micro_batch else 4 * sum(units)
    return {"states": (2 + 4 + 8) * shard, "gradients": gradients, "whole_parameters": 2 * whole}
