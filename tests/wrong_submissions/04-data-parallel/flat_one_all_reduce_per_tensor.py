"""Averages each tensor with its own all_reduce: one fixed cost per tensor.

replaces: flat
fails: test_flat test_flat_more
"""

import torch.distributed as dist


def all_reduce_flat(tensors):
    for t in tensors:
        dist.all_reduce(t)
        t /= dist.get_world_size()
