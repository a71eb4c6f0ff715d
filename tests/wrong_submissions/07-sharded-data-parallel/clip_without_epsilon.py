"""Scales by max_norm / norm, leaving out the 1e-6 that torch's clip_grad_norm_ adds to the norm:
the same to six digits for gradients of norm 1, a tenth off or more when the norm is a few 1e-6.

replaces: clip
fails: test_clip test_clip_more
says: leaving out the 1e-6
"""

import torch
import torch.distributed as dist


def clip_sharded_(grad_shards, max_norm):
    squares = torch.zeros(1, dtype=torch.float64)
    for g in grad_shards:
        squares += g.double().square().sum()
    dist.all_reduce(squares)
    norm = squares.sqrt().item()
    if norm > max_norm:
        for g in grad_shards:
            g.mul_(max_norm / norm)
    return norm
