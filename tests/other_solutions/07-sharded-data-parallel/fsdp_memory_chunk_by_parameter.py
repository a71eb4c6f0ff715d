"""Cuts each parameter's rows with torch.chunk, as fully_shard does, and walks the units in backward
order, pairing each with the one prefetched beside it.

replaces: fsdp_memory
fails: none
"""

import torch


def fully_shard_memory(layers, world_size, reshard_after_forward, sync_each_micro_batch):
    rank0 = 0
    units = []
    for out_f, in_f in layers:
        rows = torch.arange(out_f).chunk(world_size)[0].numel()  # rank 0 gets the first, largest chunk
        rank0 += rows * in_f + rows
        units.append(out_f * in_f + out_f)
    peak = 0
    for i in reversed(range(len(units))):
        alive = sum(units) if not reshard_after_forward else units[i] + (units[i - 1] if i > 0 else 0)
        peak = max(peak, alive)
    states = rank0 * 4 + rank0 * 4 * 2
    gradients = rank0 * 4 if sync_each_micro_batch else sum(units) * 4
    return {"states": states, "gradients": gradients, "whole_parameters": peak * 2}
