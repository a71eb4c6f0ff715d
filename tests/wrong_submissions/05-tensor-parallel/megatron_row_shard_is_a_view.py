"""Keeps a view of the whole weight as the row-parallel shard: every rank holds all of fc2.

replaces: megatron
fails: test_row test_mlp test_mlp_more
says: It is a view into the whole layer's weight
"""

from torch import nn


class RowParallelLinear(RowParallelLinear):  # noqa: F821 - the solution's, then changed
    def __init__(self, full, rank, world_size):
        super().__init__(full, rank, world_size)
        columns = _share(full.in_features, rank, world_size)  # noqa: F821
        self.weight = nn.Parameter(full.weight.data[:, columns])
