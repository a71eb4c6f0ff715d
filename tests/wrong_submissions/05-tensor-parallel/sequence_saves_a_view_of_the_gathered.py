"""Gathers fc1's input again in the backward pass, but saves its own tokens as a slice of the
gathered input: a view, which keeps the whole gathered tensor's storage alive.

replaces: sequence
fails: test_sequence test_sequence_more
says: a view into a storage
"""

import torch.distributed as dist


class GatherIntoFc1(GatherIntoFc1):  # noqa: F821 - the solution's, then changed
    @staticmethod
    def forward(ctx, mine, weight):
        everyone = _gather_tokens(mine)  # noqa: F821 - the solution's
        rows = mine.shape[0]
        start = dist.get_rank() * rows
        ctx.save_for_backward(everyone[start : start + rows], weight)
        return everyone @ weight.T
