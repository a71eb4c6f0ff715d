"""Copies back the sum over the ranks, not the average.

replaces: flat
fails: test_flat test_flat_more
"""

import torch
import torch.distributed as dist


def all_reduce_flat(tensors):
    flat = torch.cat([t.reshape(-1) for t in tensors])
    dist.all_reduce(flat)
    offset = 0
    for t in tensors:
        t.copy_(flat[offset : offset + t.numel()].view_as(t))
        offset += t.numel()
