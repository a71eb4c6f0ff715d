"""Sums the row-parallel output with an all_reduce on its .data, which autograd does not see, and
leaves ReduceFromParallel (g), unused, with an all_reduce backward: the MLP is right, g is not.

replaces: megatron
fails: test_mlp_more
says: adjoint of an all_reduce is the identity
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F


class ReduceFromParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad


class RowParallelLinear(RowParallelLinear):  # noqa: F821 - the solution's, then changed
    def forward(self, x):
        y = F.linear(x, self.weight)
        dist.all_reduce(y.data)
        return y + self.bias
