"""Sums the heads' partial outputs with torch's functional all_reduce, as DTensor does.

replaces: attention
fails: none
"""

import math

import torch.distributed as dist
import torch.distributed._functional_collectives as funcol


def tensor_parallel_attention(x, wq, wk, wv, wo, heads):
    batch, seq, _ = x.shape

    def split(t):
        return t.view(batch, seq, heads, -1).transpose(1, 2)

    q, k, v = split(x @ wq.T), split(x @ wk.T), split(x @ wv.T)
    weights = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).softmax(dim=-1)
    partial = (weights @ v).transpose(1, 2).reshape(batch, seq, -1) @ wo.T
    return funcol.wait_tensor(funcol.all_reduce(partial, "sum", dist.group.WORLD))
