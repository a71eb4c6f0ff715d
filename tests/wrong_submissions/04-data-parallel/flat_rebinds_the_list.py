"""Puts new tensors into the list instead of averaging the given tensors in place: the caller's
tensors (a model's gradients, say) never change.

replaces: flat
fails: test_flat test_flat_more
"""

import torch
import torch.distributed as dist


def all_reduce_flat(tensors):
    flat = torch.cat([t.reshape(-1) for t in tensors])
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    pieces = flat.split([t.numel() for t in tensors])
    tensors[:] = [piece.view_as(t).clone() for piece, t in zip(pieces, tensors, strict=True)]
