"""Backward all_reduces the whole gradient, then keeps its own columns: twice the bytes of a reduce_scatter.

replaces: allgather
fails: test_allgather test_allgather_more
says: an all_reduce delivers every feature's to every rank
"""

import torch
import torch.distributed as dist


class AllGatherFeatures(AllGatherFeatures):  # noqa: F821 - the solution's, then changed
    @staticmethod
    def backward(ctx, grad):
        total = grad.clone()
        dist.all_reduce(total)
        return total.chunk(dist.get_world_size(), dim=1)[dist.get_rank()].contiguous()


def allgather_mlp(x, local_weights):
    for w in local_weights:
        x = AllGatherFeatures.apply(torch.nn.functional.gelu(x @ w))
    return x
