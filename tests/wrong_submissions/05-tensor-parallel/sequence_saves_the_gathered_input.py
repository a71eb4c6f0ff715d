"""Gathers the tokens into an autograd function of their own and calls fc1 on them: fc1 saves the
gathered input for its weight's gradient, so every rank keeps every token's activation.

replaces: sequence
fails: test_sequence test_sequence_more
says: saved for backward fc1's gathered input
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F


class GatherTokens(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return _gather_tokens(x)  # noqa: F821 - the solution's

    @staticmethod
    def backward(ctx, grad):
        mine = torch.empty(grad.shape[0] // dist.get_world_size(), grad.shape[1])
        reduce_scatter_single(mine, grad.contiguous())  # noqa: F821 - the setup cell imports it
        return mine


class SequenceParallelBlock(SequenceParallelBlock):  # noqa: F821 - the solution's, then changed
    def forward(self, x):
        everyone = GatherTokens.apply(self.norm(x))
        return x + ScatterTokens.apply(self.fc2(F.gelu(self.fc1(everyone))))  # noqa: F821
