"""Keeps the lecture's plain all_gather: no gradient reaches the weights.

replaces: allgather
fails: test_allgather test_allgather_more
says: A collective called directly has no autograd formula
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F


def allgather_mlp(x, local_weights):
    for w in local_weights:
        local = F.gelu(x @ w)
        pieces = [torch.empty_like(local) for _ in range(dist.get_world_size())]
        dist.all_gather(pieces, local)
        x = torch.cat(pieces, dim=1)
    return x
