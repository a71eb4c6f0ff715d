"""Saves only its own tokens with save_for_backward, but keeps the gathered input as an attribute
of ctx and uses it in the backward pass: autograd's saved tensors are small, the rank's memory is not.

replaces: sequence
fails: test_sequence test_sequence_more
says: though autograd did not save it
"""

import torch


class GatherIntoFc1(GatherIntoFc1):  # noqa: F821 - the solution's, then changed
    @staticmethod
    def forward(ctx, mine, weight):
        ctx.save_for_backward(mine, weight)
        ctx.everyone = _gather_tokens(mine)  # noqa: F821 - the solution's
        return ctx.everyone @ weight.T

    @staticmethod
    def backward(ctx, grad):
        mine, weight = ctx.saved_tensors
        grad_mine = torch.empty_like(mine)
        reduce_scatter_single(grad_mine, grad @ weight)  # noqa: F821 - the setup cell imports it
        return grad_mine, grad.T @ ctx.everyone
