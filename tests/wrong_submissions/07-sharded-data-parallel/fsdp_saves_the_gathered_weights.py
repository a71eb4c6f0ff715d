"""Saves each layer's gathered weights for backward instead of gathering them again: every layer
stays whole from its forward until its backward.

replaces: fsdp
fails: test_fsdp test_fsdp_more
says: if autograd saves them for backward
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F


class KeepsWeights(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, shard, model, i):
        flat = model.gathered(i)
        model.prefetch(i + 1)
        out_features, in_features = model.dims[i]
        ctx.save_for_backward(x, shard, flat)
        ctx.dims = (out_features, in_features)
        weight = flat[: out_features * in_features].view(out_features, in_features)
        return F.linear(x, weight, flat[out_features * in_features : out_features * (in_features + 1)])

    @staticmethod
    def backward(ctx, grad_output):
        x, shard, flat = ctx.saved_tensors
        out_features, in_features = ctx.dims
        weight = flat[: out_features * in_features].view(out_features, in_features)
        grad_flat = torch.zeros_like(flat)
        grad_flat[: out_features * in_features] = (grad_output.T @ x).reshape(-1)
        grad_flat[out_features * in_features : out_features * (in_features + 1)] = grad_output.sum(0)
        grad_shard = torch.empty_like(shard)
        reduce_scatter_single(grad_shard, grad_flat)  # noqa: F821 - the setup cell imports it
        return grad_output @ weight, grad_shard / dist.get_world_size(), None, None


class FSDPMLP(FSDPMLP):  # noqa: F821 - the solution cell defines it
    def forward(self, x):
        for i, shard in enumerate(self.shards):
            x = KeepsWeights.apply(x, shard, self, i)
            if i < len(self.shards) - 1:
                x = F.gelu(x)
        return x
