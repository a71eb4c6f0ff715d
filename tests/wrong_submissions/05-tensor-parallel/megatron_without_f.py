"""Leaves out the operator before fc1: the input's gradient stays each rank's part of it.

replaces: megatron
fails: test_mlp test_mlp_more
says: the backward pass issued no all_reduce
"""

import torch.nn.functional as F


class TensorParallelMLP(TensorParallelMLP):  # noqa: F821 - the solution's, then changed
    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))
