"""Divides the parameters evenly over the ranks, as section 1 does, though rank 0 holds
ceil(rows / world_size) rows of each parameter.

replaces: fsdp_memory
fails: test_fsdp_memory test_fsdp_memory_more
says: divide the parameters evenly
"""


def fully_shard_memory(layers, world_size, reshard_after_forward, sync_each_micro_batch):
    units = [o * i + o for o, i in layers]
    psi = sum(units)
    whole = (
        max([a + b for a, b in zip(units, units[1:], strict=False)] or units)
        if reshard_after_forward
        else psi
    )
    gradients = 4 * psi // world_size if sync_each_micro_batch else 4 * psi
    return {"states": 12 * psi // world_size, "gradients": gradients, "whole_parameters": 2 * whole}
