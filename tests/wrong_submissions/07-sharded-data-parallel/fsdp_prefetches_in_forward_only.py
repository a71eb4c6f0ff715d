"""Prefetches in forward only: starts the next layer's all_gather (async) before running this
one, but backward gathers each layer with a blocking all_gather (the list form) just when it needs
it, so nothing overlaps there.

replaces: fsdp
fails: test_fsdp test_fsdp_more
says: in step 1's backward
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


def start_gather(shard):
    flat = shard.new_empty(shard.numel() * dist.get_world_size())
    return flat, all_gather_single(flat, shard.detach(), async_op=True)  # noqa: F821 - the setup cell imports it


class PrefetchedLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, shard, flat, out_features, in_features):
        ctx.save_for_backward(x, shard)
        ctx.dims = (out_features, in_features)
        w = flat[: out_features * in_features].view(out_features, in_features)
        return x @ w.T + flat[out_features * in_features : out_features * (in_features + 1)]

    @staticmethod
    def backward(ctx, grad_output):
        x, shard = ctx.saved_tensors
        out_features, in_features = ctx.dims
        n = dist.get_world_size()
        pieces = [torch.empty_like(shard) for _ in range(n)]
        dist.all_gather(pieces, shard.detach())
        w = torch.cat(pieces)[: out_features * in_features].view(out_features, in_features)
        grad_x = grad_output @ w
        del pieces, w
        grads = torch.cat([(grad_output.T @ x).reshape(-1), grad_output.sum(0)])
        grads = torch.cat([grads, grads.new_zeros(shard.numel() * n - grads.numel())])
        mine = torch.empty_like(shard)
        dist.reduce_scatter(mine, list(grads.chunk(n)))
        return grad_x, mine / n, None, None, None


class FSDPMLP(nn.Module):
    def __init__(self, layers):
        super().__init__()
        n, rank = dist.get_world_size(), dist.get_rank()
        self.sizes = [(layer.out_features, layer.in_features) for layer in layers]
        self.shards = nn.ParameterList()
        for layer in layers:
            flat = torch.cat([layer.weight.detach().flatten(), layer.bias.detach()])
            size = -(-flat.numel() // n)
            flat = torch.cat([flat, flat.new_zeros(size * n - flat.numel())])
            self.shards.append(nn.Parameter(flat.chunk(n)[rank].clone()))

    def forward(self, x):
        pending = start_gather(self.shards[0])
        for i, shard in enumerate(self.shards):
            flat, handle = pending
            handle.wait()
            if i + 1 < len(self.shards):
                pending = start_gather(self.shards[i + 1])  # arrives while this layer computes
            x = PrefetchedLinear.apply(x, shard, flat, *self.sizes[i])
            del flat
            if i + 1 < len(self.shards):
                x = F.gelu(x)
        return x
