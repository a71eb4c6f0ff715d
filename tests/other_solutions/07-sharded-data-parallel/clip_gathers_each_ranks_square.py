"""All_gathers each rank's sum of squares (one number from each rank) and adds them up: a few
numbers travel, as an all_reduce's would, only by another collective.

replaces: clip
fails: none
"""

import torch
import torch.distributed as dist


def clip_sharded_(grad_shards, max_norm):
    mine = sum((g.double() ** 2).sum() for g in grad_shards) + torch.zeros((), dtype=torch.float64)
    everyone = [torch.zeros(1, dtype=torch.float64) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, mine.reshape(1))
    norm = torch.cat(everyone).sum().sqrt()
    factor = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
    for g in grad_shards:
        g.mul_(factor.to(g.dtype))
    return norm.item()
