"""Splits the heads with view(batch, heads, seq, d), which mixes tokens and heads: view, then transpose.

replaces: attention
fails: test_attention test_attention_more
says: split the heads with a reshape to (batch, heads, seq, head_dim)
"""

import math

import torch.distributed as dist


def tensor_parallel_attention(x, wq, wk, wv, wo, heads):
    batch, seq, _ = x.shape
    q, k, v = (t.reshape(batch, heads, seq, -1) for t in (x @ wq.T, x @ wk.T, x @ wv.T))
    weights = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).softmax(dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(batch, seq, -1) @ wo.T
    dist.all_reduce(out)
    return out
