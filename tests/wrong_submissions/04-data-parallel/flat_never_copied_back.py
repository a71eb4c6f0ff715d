"""Averages a flat copy of the tensors, then leaves the tensors themselves as they were.

replaces: flat
fails: test_flat test_flat_more
"""

import torch
import torch.distributed as dist


def all_reduce_flat(tensors):
    flat = torch.cat([t.reshape(-1) for t in tensors])
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
