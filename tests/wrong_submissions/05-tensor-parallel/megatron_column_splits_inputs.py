"""Gives the column-parallel layer columns of the weight (input features), not rows (output features).

replaces: megatron
fails: test_column test_mlp test_mlp_more
"""

import torch.nn.functional as F
from torch import nn


class ColumnParallelLinear(nn.Module):
    def __init__(self, full, rank, world_size):
        super().__init__()
        size = full.in_features // world_size
        self.weight = nn.Parameter(full.weight[:, rank * size : (rank + 1) * size].detach().clone())
        self.bias = nn.Parameter(full.bias[rank * size : (rank + 1) * size].detach().clone())

    def forward(self, x):
        size = self.weight.shape[1]
        return (
            F.linear(x[:, :size], self.weight, None)
            + self.bias.repeat(self.weight.shape[0] // size + 1)[: self.weight.shape[0]]
        )
