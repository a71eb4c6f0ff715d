"""Joins the gathered slices along dim 0, the batch, where they are slices of the features.

replaces: allgather
fails: test_allgather test_allgather_more
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F


def allgather_mlp_forward(x, local_weights):
    for w in local_weights:
        local = F.gelu(x @ w)
        pieces = [torch.empty_like(local) for _ in range(dist.get_world_size())]
        dist.all_gather(pieces, local)
        x = torch.cat(pieces, dim=0)
    return x
