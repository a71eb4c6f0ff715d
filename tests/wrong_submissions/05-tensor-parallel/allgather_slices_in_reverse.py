"""Puts the gathered slices in the wrong order: the last rank's features first.

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
        x = torch.cat(pieces[::-1], dim=1)
    return x
