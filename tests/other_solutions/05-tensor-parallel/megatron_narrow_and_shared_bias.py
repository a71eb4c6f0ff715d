"""Cuts the shards with narrow and contiguous copies, and lets the row-parallel layer keep the very
bias Parameter it was given (the whole bias is what it must hold).

replaces: megatron
fails: none
"""

import torch
import torch.nn.functional as F
from torch import nn


class ColumnParallelLinear(nn.Module):
    def __init__(self, full, rank, world_size):
        super().__init__()
        n = full.out_features // world_size
        with torch.no_grad():
            self.weight = nn.Parameter(full.weight.narrow(0, rank * n, n).contiguous().clone())
            self.bias = nn.Parameter(torch.empty(n).copy_(full.bias.narrow(0, rank * n, n)))

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)


class RowParallelLinear(nn.Module):
    def __init__(self, full, rank, world_size):
        super().__init__()
        n = full.in_features // world_size
        self.weight = nn.Parameter(torch.empty(full.out_features, n))
        with torch.no_grad():
            self.weight.copy_(full.weight.narrow(1, rank * n, n))
        self.bias = full.bias

    def forward(self, x):
        return ReduceFromParallel.apply(x @ self.weight.T) + self.bias  # noqa: F821 - the solution's


class TensorParallelMLP(nn.Module):
    def __init__(self, fc1, fc2, rank, world_size):
        super().__init__()
        self.fc1 = ColumnParallelLinear(fc1, rank, world_size)
        self.fc2 = RowParallelLinear(fc2, rank, world_size)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(CopyToParallel.apply(x))))  # noqa: F821 - the solution's
