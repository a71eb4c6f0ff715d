"""Averages the ranks' sums of squares (ReduceOp.AVG) and multiplies by n, and scales the shards
with one foreach call, only when the norm is above max_norm.

replaces: clip
fails: none
"""

import torch
import torch.distributed as dist


def clip_sharded_(grad_shards, max_norm):
    local = torch.tensor([sum(float((g.double() ** 2).sum()) for g in grad_shards)], dtype=torch.float64)
    dist.all_reduce(local, op=dist.ReduceOp.AVG)
    norm = (local * dist.get_world_size()).sqrt().item()
    if norm > max_norm:
        scale = max_norm / (norm + 1e-6)
        torch._foreach_mul_([g for g in grad_shards if g.numel()], scale)
    return norm
