"""Reduce_scatters the gradients, but never divides the sum by the world size.

replaces: fsdp
fails: test_fsdp test_fsdp_more
says: without dividing by the world size
"""

import torch.distributed as dist
import torch.nn.functional as F


class Sums(ShardedLinear):  # noqa: F821 - the solution cell defines it
    @staticmethod
    def backward(ctx, grad_output):
        grad_x, grad_shard, _, _ = ShardedLinear.backward(ctx, grad_output)  # noqa: F821
        return grad_x, grad_shard * dist.get_world_size(), None, None


class FSDPMLP(FSDPMLP):  # noqa: F821 - the solution cell defines it
    def forward(self, x):
        for i, shard in enumerate(self.shards):
            x = Sums.apply(x, shard, self, i)
            if i < len(self.shards) - 1:
                x = F.gelu(x)
        return x
