"""All_reduces each rank's norm: norms do not add up, their squares do.

replaces: clip
fails: test_clip test_clip_more
says: add up the ranks' norms
"""

import torch
import torch.distributed as dist


def clip_sharded_(grad_shards, max_norm):
    local = sum((g.double().square().sum() for g in grad_shards), torch.zeros((), dtype=torch.float64))
    norm = local.sqrt().reshape(1)
    dist.all_reduce(norm)
    norm = norm.item()
    factor = max_norm / (norm + 1e-6)
    if factor < 1:
        for g in grad_shards:
            g.mul_(factor)
    return norm
