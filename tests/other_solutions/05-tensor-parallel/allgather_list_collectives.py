"""The gradient's columns cut with chunk and reduce_scattered in list form; the forward gathers a list.

replaces: allgather
fails: none
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F


class AllGatherFeatures(torch.autograd.Function):
    @staticmethod
    def forward(ctx, local):
        pieces = [torch.zeros_like(local) for _ in range(dist.get_world_size())]
        dist.all_gather(pieces, local.contiguous())
        return torch.cat(pieces, dim=-1)

    @staticmethod
    def backward(ctx, grad):
        parts = [part.contiguous() for part in grad.chunk(dist.get_world_size(), dim=1)]
        mine = torch.empty_like(parts[0])
        dist.reduce_scatter(mine, parts)
        return mine


def allgather_mlp(x, local_weights):
    for w in local_weights:
        x = AllGatherFeatures.apply(F.gelu(x @ w))
    return x
