"""Leaves the scores undivided by the square root of the head dimension.

replaces: attention
fails: test_attention test_attention_more
says: leave the scores undivided by the square root of the head dimension
"""

import torch.distributed as dist


def tensor_parallel_attention(x, wq, wk, wv, wo, heads):
    batch, seq, _ = x.shape
    q, k, v = (t.view(batch, seq, heads, -1).transpose(1, 2) for t in (x @ wq.T, x @ wk.T, x @ wv.T))
    weights = (q @ k.transpose(-1, -2)).softmax(dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(batch, seq, -1) @ wo.T
    dist.all_reduce(out)
    return out
