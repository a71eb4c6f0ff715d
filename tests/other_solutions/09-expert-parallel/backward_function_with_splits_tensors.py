"""An autograd Function that takes the splits as tensors and swaps them in backward.

replaces: backward
fails: none
"""

import torch
import torch.distributed as dist


class Exchange(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, sizes):
        out_sizes, in_sizes = sizes
        ctx.sizes = (in_sizes, out_sizes)  # what backward sends and receives
        out = torch.empty((sum(out_sizes),) + tuple(x.shape[1:]), dtype=x.dtype)
        dist.all_to_all_single(out, x.contiguous(), out_sizes, in_sizes)
        return out

    @staticmethod
    def backward(ctx, grad):
        return Exchange.apply(grad, ctx.sizes), None


def exchange_with_grad(tensor, output_splits, input_splits):
    sizes = (torch.as_tensor(output_splits).tolist(), torch.as_tensor(input_splits).tolist())
    return Exchange.apply(tensor, sizes)
