"""Runs fc1 on its own tokens only, without gathering the others'.

replaces: sequence
fails: test_sequence test_sequence_more
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F


def sequence_parallel_mlp(x, w1, w2):
    partial = F.gelu(x @ w1.T) @ w2.T
    out = torch.empty(x.shape[0] // dist.get_world_size(), x.shape[1])
    reduce_scatter_single(out, partial)  # noqa: F821 - the setup cell imports it
    return out
