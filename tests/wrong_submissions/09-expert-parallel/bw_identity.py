"""The backward returns the output's gradient as it is, as if the all_to_all were local.

replaces: backward
fails: test_backward test_backward_more
says: reverse all_to_all
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
        return grad, None, None


def exchange_with_grad(tensor, output_splits, input_splits):
    return AllToAll.apply(tensor, [int(n) for n in output_splits], [int(n) for n in input_splits])
