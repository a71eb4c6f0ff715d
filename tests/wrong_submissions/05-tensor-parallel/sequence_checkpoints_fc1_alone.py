"""Wraps fc1 alone in activation checkpointing, after the gather: fc1 saves nothing, but the
checkpoint keeps its input, the gathered tokens, to run fc1 again in the backward pass.

replaces: sequence
fails: test_sequence test_sequence_more
says: fc1's gathered input
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


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
        hidden = checkpoint(self.fc1, everyone, use_reentrant=False)
        return x + ScatterTokens.apply(self.fc2(F.gelu(hidden)))  # noqa: F821
