"""Gathers the tokens first and runs the LayerNorm on the whole sequence: the same numbers and
collectives, but the LayerNorm's work and activations are no longer split across the ranks.

replaces: sequence
fails: test_sequence test_sequence_more
says: its LayerNorm ran on
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
        everyone = self.norm(GatherTokens.apply(x))
        return x + ScatterTokens.apply(self.fc2(F.gelu(self.fc1(everyone))))  # noqa: F821
