"""All-reduces every token's output to every rank, then keeps its own: twice the bytes a reduce_scatter sends.

replaces: sequence
fails: test_sequence test_sequence_more
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F


def sequence_parallel_mlp(x, w1, w2):
    world_size, rank = dist.get_world_size(), dist.get_rank()
    everyone = torch.empty(world_size * x.shape[0], x.shape[1])
    all_gather_single(everyone, x.contiguous())  # noqa: F821 - the setup cell imports it
    out = F.gelu(everyone @ w1.T) @ w2.T
    dist.all_reduce(out)
    return out[rank * x.shape[0] : (rank + 1) * x.shape[0]]
