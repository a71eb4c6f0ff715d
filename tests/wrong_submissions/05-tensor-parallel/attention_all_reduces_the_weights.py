"""Rebuilds the whole wq, wk, wv and wo with one all_reduce of zero-padded shards, then runs every
head on every rank: one all_reduce, the right output, and no tensor parallelism.

replaces: attention
fails: test_attention test_attention_more
says: Rebuilding the whole weights on every rank is not tensor parallelism
"""

import math

import torch
import torch.distributed as dist


def tensor_parallel_attention(x, wq, wk, wv, wo, heads):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    batch, seq, d = x.shape
    mine = slice(rank * wq.shape[0], (rank + 1) * wq.shape[0])
    packed = torch.zeros(4, d, d)
    packed[0, mine], packed[1, mine], packed[2, mine] = wq, wk, wv
    packed[3][:, mine] = wo
    dist.all_reduce(packed)

    def split(t):
        return t.view(batch, seq, heads * world_size, -1).transpose(1, 2)

    q, k, v = (split(x @ w.T) for w in packed[:3])
    weights = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).softmax(dim=-1)
    return (weights @ v).transpose(1, 2).reshape(batch, seq, d) @ packed[3].T
