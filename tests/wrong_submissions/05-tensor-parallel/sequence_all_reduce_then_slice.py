"""All-reduces every token's output to every rank, then keeps its own: twice the bytes a reduce_scatter sends.

replaces: sequence
fails: test_sequence test_sequence_more
says: the forward pass summed the output with an all_reduce
"""

import torch
import torch.distributed as dist


class ScatterTokens(torch.autograd.Function):
    @staticmethod
    def forward(ctx, partial):
        world_size, rank = dist.get_world_size(), dist.get_rank()
        total = partial.clone()
        dist.all_reduce(total)
        return total.chunk(world_size)[rank].contiguous()

    @staticmethod
    def backward(ctx, grad):
        everyone = torch.empty(dist.get_world_size() * grad.shape[0], grad.shape[1])
        all_gather_single(everyone, grad.contiguous())  # noqa: F821 - the setup cell imports it
        return everyone
