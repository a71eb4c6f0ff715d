"""The backward sends the gradient back with the forward's splits, not swapped.

replaces: backward
fails: test_backward test_backward_more
says: with the input and output splits swapped
"""

import torch
import torch.distributed as dist


class AllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, output_splits, input_splits):
        ctx.splits = (output_splits, input_splits)
        out = x.new_empty((sum(output_splits), *x.shape[1:]))
        dist.all_to_all_single(out, x.contiguous(), output_splits, input_splits)
        return out

    @staticmethod
    def backward(ctx, grad):
        output_splits, input_splits = ctx.splits
        back = grad.new_empty((sum(output_splits), *grad.shape[1:]))
        dist.all_to_all_single(back, grad.contiguous(), output_splits, input_splits)
        return back, None, None


def exchange_with_grad(tensor, output_splits, input_splits):
    return AllToAll.apply(tensor, [int(n) for n in output_splits], [int(n) for n in input_splits])
