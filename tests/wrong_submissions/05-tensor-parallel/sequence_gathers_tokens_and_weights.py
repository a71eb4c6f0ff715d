"""Gathers the tokens together with both weights' shards in one all_gather, computes the whole
MLP on every rank, and issues a reduce_scatter of zeros so the count of collectives looks right.

replaces: sequence
fails: test_sequence test_sequence_more
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F


def sequence_parallel_mlp(x, w1, w2):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    t, n = x.shape[0], w1.shape[0]
    packed = torch.cat([x, w1, w2.T])  # all three have d columns
    everyone = torch.empty(world_size * packed.shape[0], packed.shape[1])
    all_gather_single(everyone, packed)  # noqa: F821 - the notebook's
    parts = everyone.view(world_size, -1, packed.shape[1])
    x_all = parts[:, :t].reshape(-1, packed.shape[1])
    w1_all = parts[:, t : t + n].reshape(-1, packed.shape[1])
    w2_all = parts[:, t + n :].reshape(-1, packed.shape[1]).T
    full = F.gelu(x_all @ w1_all.T) @ w2_all.T
    nothing = torch.empty_like(x)
    reduce_scatter_single(nothing, torch.zeros(world_size * t, x.shape[1]))  # noqa: F821
    return full[rank * t : (rank + 1) * t] + nothing
