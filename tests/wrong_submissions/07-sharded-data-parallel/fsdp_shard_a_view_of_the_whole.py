"""Keeps each shard as a slice of the layer's padded flat buffer, without copying it: the slice is
a view, so its storage is the whole buffer, and every rank still holds every layer whole.

replaces: fsdp
fails: test_fsdp test_fsdp_more
says: a slice is a view that shares its tensor's storage
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


class FSDPMLP(FSDPMLP):  # noqa: F821 - the solution cell defines it
    def __init__(self, layers):
        nn.Module.__init__(self)
        world_size, rank = dist.get_world_size(), dist.get_rank()
        self.dims = [(layer.out_features, layer.in_features) for layer in layers]
        shards = []
        for layer in layers:
            flat = torch.cat([layer.weight.detach().reshape(-1), layer.bias.detach()])
            size = -(-flat.numel() // world_size)
            flat = F.pad(flat, (0, size * world_size - flat.numel()))
            shards.append(nn.Parameter(flat[rank * size : (rank + 1) * size]))  # a view of all of it
        self.shards = nn.ParameterList(shards)
        self.pending = {}
