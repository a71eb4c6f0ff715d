"""Gathers every rank's shards to compute the norm: the right numbers, but the gradients travel,
which sharding was meant to avoid.

replaces: clip
fails: test_clip test_clip_more
says: not the gradients themselves
"""

import torch
import torch.distributed as dist


def clip_sharded_(grad_shards, max_norm):
    mine = torch.cat([g.reshape(-1) for g in grad_shards] + [torch.zeros(0)])
    sizes = [torch.zeros(1, dtype=torch.long) for _ in range(dist.get_world_size())]
    dist.all_gather(sizes, torch.tensor([mine.numel()]))
    largest = int(max(s.item() for s in sizes))
    pieces = [torch.zeros(largest) for _ in sizes]
    dist.all_gather(pieces, torch.cat([mine, torch.zeros(largest - mine.numel())]))
    norm = torch.cat(pieces).double().norm().item()
    factor = max_norm / (norm + 1e-6)
    if factor < 1:
        for g in grad_shards:
            g.mul_(factor)
    return norm
