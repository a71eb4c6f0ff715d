"""Puts the 1e-6 under the square root, max_norm / sqrt(sum of squares + 1e-6), where torch adds it
to the norm: at tiny norms the factor is far too small.

replaces: clip
fails: test_clip test_clip_more
says: under the square root
"""

import torch
import torch.distributed as dist


def clip_sharded_(grad_shards, max_norm):
    squares = torch.zeros(1, dtype=torch.float64)
    for g in grad_shards:
        squares += g.double().square().sum()
    dist.all_reduce(squares)
    norm = squares.sqrt().item()
    factor = max_norm / (squares.item() + 1e-6) ** 0.5
    if factor < 1:
        for g in grad_shards:
            g.mul_(factor)
    return norm
