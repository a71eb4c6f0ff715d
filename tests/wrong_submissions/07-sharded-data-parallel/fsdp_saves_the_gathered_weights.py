"""Saves each layer's gathered weight for backward instead of gathering it again: every layer
stays whole from its forward until its backward.

replaces: fsdp
fails: test_fsdp test_fsdp_more
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F


class KeepsWeights(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, shard, out_features, in_features):
        flat = shard.new_empty(shard.numel() * dist.get_world_size())
        all_gather_single(flat, shard.detach())  # noqa: F821 - the setup cell imports it
        weight = flat[: out_features * in_features].view(out_features, in_features)
        bias = flat[out_features * in_features : out_features * (in_features + 1)]
        ctx.save_for_backward(x, flat)
        ctx.dims = (out_features, in_features, shard.numel())
        return F.linear(x, weight, bias)

    @staticmethod
    def backward(ctx, grad_output):
        x, flat = ctx.saved_tensors
        out_features, in_features, size = ctx.dims
        weight = flat[: out_features * in_features].view(out_features, in_features)
        grad_flat = torch.zeros_like(flat)
        grad_flat[: out_features * in_features] = (grad_output.T @ x).reshape(-1)
        grad_flat[out_features * in_features : out_features * (in_features + 1)] = grad_output.sum(0)
        grad_shard = flat.new_empty(size)
        reduce_scatter_single(grad_shard, grad_flat)  # noqa: F821 - the setup cell imports it
        return grad_output @ weight, grad_shard / dist.get_world_size(), None, None


class FSDPMLP(FSDPMLP):  # noqa: F821 - the solution cell defines it
    def forward(self, x):
        for i, (shard, (out_features, in_features)) in enumerate(zip(self.shards, self.dims, strict=True)):
            x = KeepsWeights.apply(x, shard, out_features, in_features)
            if i < len(self.shards) - 1:
                x = F.gelu(x)
        return x
