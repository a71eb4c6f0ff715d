"""Cuts the shards with chunk, keeps the bias out of the row-parallel layer's all_reduce by adding
it after, and writes f and g with in-place all_reduces on clones.

replaces: megatron
fails: none
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


class CopyToParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        total = grad.contiguous().clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        return total


class ReduceFromParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        total = x.contiguous().clone()
        dist.all_reduce(total)
        return total

    @staticmethod
    def backward(ctx, grad):
        return grad.clone()


class ColumnParallelLinear(nn.Module):
    def __init__(self, full, rank, world_size):
        super().__init__()
        self.weight = nn.Parameter(full.weight.detach().chunk(world_size, dim=0)[rank].clone())
        self.bias = nn.Parameter(full.bias.detach().chunk(world_size)[rank].clone())

    def forward(self, x):
        return x @ self.weight.T + self.bias


class RowParallelLinear(nn.Module):
    def __init__(self, full, rank, world_size):
        super().__init__()
        self.weight = nn.Parameter(full.weight.detach().chunk(world_size, dim=1)[rank].clone())
        self.bias = nn.Parameter(full.bias.detach().clone())

    def forward(self, x):
        return ReduceFromParallel.apply(x @ self.weight.T) + self.bias


class TensorParallelMLP(nn.Module):
    def __init__(self, fc1, fc2, rank, world_size):
        super().__init__()
        self.fc1 = ColumnParallelLinear(fc1, rank, world_size)
        self.fc2 = RowParallelLinear(fc2, rank, world_size)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(CopyToParallel.apply(x))))
