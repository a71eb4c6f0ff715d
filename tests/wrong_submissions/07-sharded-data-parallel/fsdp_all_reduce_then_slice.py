"""All_reduces each layer's whole gradient, then keeps its slice, instead of a reduce_scatter.

replaces: fsdp
fails: test_fsdp test_fsdp_more
says: all_reduce(s) in backward
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F


class AllReduces(ShardedLinear):  # noqa: F821 - the solution cell defines it
    @staticmethod
    def backward(ctx, grad_output):
        x, shard = ctx.saved_tensors
        model, i = ctx.model, ctx.i
        out_features, in_features = model.dims[i]
        flat = model.gathered(i)
        model.prefetch(i - 1)
        weight = flat[: out_features * in_features].view(out_features, in_features)
        grad_x = grad_output @ weight
        grad_flat = torch.zeros_like(flat)
        grad_flat[: out_features * in_features] = (grad_output.T @ x).reshape(-1)
        grad_flat[out_features * in_features : out_features * (in_features + 1)] = grad_output.sum(0)
        dist.all_reduce(grad_flat)
        rank, size = dist.get_rank(), shard.numel()
        return grad_x, grad_flat[rank * size : (rank + 1) * size] / dist.get_world_size(), None, None


class FSDPMLP(FSDPMLP):  # noqa: F821 - the solution cell defines it
    def forward(self, x):
        for i, shard in enumerate(self.shards):
            x = AllReduces.apply(x, shard, self, i)
            if i < len(self.shards) - 1:
                x = F.gelu(x)
        return x
