"""Keeps fc1's and fc2's shards as views of the whole weights (a slice, made a Parameter, shares
its tensor's storage): every rank still holds both whole matrices.

replaces: sequence
fails: test_sequence test_sequence_more
says: view into the whole layer's weight
"""

from torch import nn


class SequenceParallelBlock(SequenceParallelBlock):  # noqa: F821 - the solution's, then changed
    def __init__(self, norm, fc1, fc2, rank, world_size):
        super().__init__(norm, fc1, fc2, rank, world_size)
        n = fc1.out_features // world_size
        self.fc1.weight = nn.Parameter(fc1.weight.detach()[rank * n : (rank + 1) * n])
        self.fc2.weight = nn.Parameter(fc2.weight.detach()[:, rank * n : (rank + 1) * n])
