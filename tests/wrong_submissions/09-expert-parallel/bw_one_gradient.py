"""The backward returns only the tensor's gradient, none for the splits.

replaces: backward
fails: test_backward test_backward_more
says: one gradient for each argument of forward
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
        back = grad.new_empty((sum(input_splits), *grad.shape[1:]))
        dist.all_to_all_single(back, grad.contiguous(), input_splits, output_splits)
        return back


def exchange_with_grad(tensor, output_splits, input_splits):
    return AllToAll.apply(tensor, [int(n) for n in output_splits], [int(n) for n in input_splits])
