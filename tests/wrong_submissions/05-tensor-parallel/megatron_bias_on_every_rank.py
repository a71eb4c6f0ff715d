"""Adds the row-parallel layer's bias on every rank before the all_reduce: world_size times over.

replaces: megatron
fails: test_row test_mlp test_mlp_more
says: add the bias on every rank before the all_reduce
"""

import torch.nn.functional as F


class RowParallelLinear(RowParallelLinear):  # noqa: F821 - the solution's, then changed
    def forward(self, x):
        return ReduceFromParallel.apply(F.linear(x, self.weight, self.bias))  # noqa: F821
