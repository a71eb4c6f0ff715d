"""Gathers the tokens by all_reducing a zeroed tensor of every token, into which each rank wrote its own.

replaces: sequence
fails: test_sequence test_sequence_more
says: gathered the input's tokens with an all_reduce
"""

import torch
import torch.distributed as dist


class GatherTokens(GatherTokens):  # noqa: F821 - the solution's, then changed
    @staticmethod
    def forward(ctx, x):
        world_size, rank = dist.get_world_size(), dist.get_rank()
        everyone = torch.zeros(world_size * x.shape[0], x.shape[1])
        everyone[rank * x.shape[0] : (rank + 1) * x.shape[0]] = x
        dist.all_reduce(everyone)
        return everyone
