"""Leaves out the all_reduce after fc2: each rank returns its partial sum of the output, plus the bias.

replaces: megatron
fails: test_row test_mlp test_mlp_more
says: return this rank's partial sum with the bias, without the others'
"""

import torch.nn.functional as F


class RowParallelLinear(RowParallelLinear):  # noqa: F821 - the solution's, then changed
    def forward(self, x):
        return F.linear(x, self.weight, self.bias)
