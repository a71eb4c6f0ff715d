"""Scales by max_norm / norm even when the norm is already below max_norm, stretching small
gradients.

replaces: clip
fails: test_clip test_clip_more
says: clipping only ever shrinks gradients
"""

import torch
import torch.distributed as dist


def clip_sharded_(grad_shards, max_norm):
    squares = torch.zeros(1, dtype=torch.float64)
    for g in grad_shards:
        squares += g.double().square().sum()
    dist.all_reduce(squares)
    norm = squares.sqrt().item()
    for g in grad_shards:
        g.mul_(max_norm / (norm + 1e-6))
    return norm
