"""Clips correctly, then returns the norm of the clipped gradients (max_norm, or a hair under it,
whenever they were clipped), where clip_grad_norm_ returns the norm they had before.

replaces: clip
fails: test_clip test_clip_more
says: return the norm after clipping
"""

import torch
import torch.distributed as dist


def _norm(grad_shards):
    squares = torch.zeros(1, dtype=torch.float64)
    for g in grad_shards:
        squares += g.double().square().sum()
    dist.all_reduce(squares)
    return squares.sqrt().item()


def clip_sharded_(grad_shards, max_norm):
    factor = max_norm / (_norm(grad_shards) + 1e-6)
    if factor < 1:
        for g in grad_shards:
            g.mul_(factor)
    return _norm(grad_shards)
