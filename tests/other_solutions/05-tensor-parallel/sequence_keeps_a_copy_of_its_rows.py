"""Cuts its own tokens back out of the gathered input and saves a copy of them (a tensor of its
own, not a view of the gathered one): the same bytes kept as the shard it was given.

replaces: sequence
fails: none
"""

import torch
import torch.distributed as dist


class GatherIntoFc1(GatherIntoFc1):  # noqa: F821 - the solution's, then changed
    @staticmethod
    def forward(ctx, mine, weight):
        everyone = _gather_tokens(mine)  # noqa: F821 - the solution's
        rows = mine.shape[0]
        start = dist.get_rank() * rows
        ctx.save_for_backward(everyone[start : start + rows].clone(), weight)
        return everyone @ weight.T

    @staticmethod
    def backward(ctx, grad):
        mine, weight = ctx.saved_tensors
        everyone = torch.empty(grad.shape[0], mine.shape[1])
        all_gather_single(everyone, mine)  # noqa: F821 - the setup cell imports it
        grad_mine = torch.empty_like(mine)
        reduce_scatter_single(grad_mine, grad @ weight)  # noqa: F821
        return grad_mine, grad.T @ everyone
