"""Keeps a view of the whole weight as the column-parallel shard: every rank holds all of fc1.

replaces: megatron
fails: test_column test_mlp test_mlp_more
says: It is a view into the whole layer's weight
"""

from torch import nn


class ColumnParallelLinear(ColumnParallelLinear):  # noqa: F821 - the solution's, then changed
    def __init__(self, full, rank, world_size):
        super().__init__(full, rank, world_size)
        rows = _share(full.out_features, rank, world_size)  # noqa: F821
        self.weight = nn.Parameter(full.weight.data[rows])  # a slice shares the whole weight's storage
