"""Gathers the tokens by all_reducing a zeroed tensor of every token, into which each rank wrote its own.

replaces: sequence
fails: test_sequence test_sequence_more
says: gathered the input's tokens with an all_reduce
"""

import torch
import torch.distributed as dist


class GatherIntoFc1(GatherIntoFc1):  # noqa: F821 - the solution's, then changed
    @staticmethod
    def forward(ctx, mine, weight):
        ctx.save_for_backward(mine, weight)
        world_size, rank = dist.get_world_size(), dist.get_rank()
        everyone = torch.zeros(world_size * mine.shape[0], mine.shape[1])
        everyone[rank * mine.shape[0] : (rank + 1) * mine.shape[0]] = mine
        dist.all_reduce(everyone)
        return everyone @ weight.T
