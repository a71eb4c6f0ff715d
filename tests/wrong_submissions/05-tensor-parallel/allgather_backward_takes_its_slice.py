"""Backward returns this rank's columns of its own gradient, as if that gradient were already whole.

replaces: allgather
fails: test_allgather test_allgather_more
says: as if that gradient were already summed over the ranks
"""

import torch
import torch.distributed as dist


class AllGatherFeatures(AllGatherFeatures):  # noqa: F821 - the solution's, then changed
    @staticmethod
    def backward(ctx, grad):
        return grad.chunk(dist.get_world_size(), dim=1)[dist.get_rank()].contiguous()


def allgather_mlp(x, local_weights):
    for w in local_weights:
        x = AllGatherFeatures.apply(torch.nn.functional.gelu(x @ w))
    return x
