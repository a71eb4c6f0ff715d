"""Gathers every layer's weight instead of its activation: the right output, but each rank ends
up holding the whole model, and sends num_dim rows per layer whatever the batch.

replaces: allgather
fails: test_allgather test_allgather_more
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F


def allgather_mlp_forward(x, local_weights):
    world_size = dist.get_world_size()
    for w in local_weights:
        pieces = [torch.empty_like(w) for _ in range(world_size)]
        dist.all_gather(pieces, w.contiguous())
        x = F.gelu(x @ torch.cat(pieces, dim=1))
    return x
