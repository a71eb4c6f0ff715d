"""Backward through the token gather keeps this rank's rows of its own gradient, without summing the ranks'.

replaces: sequence
fails: test_sequence test_sequence_more
says: keep this rank's part of the input's gradient, not the ranks' sum
"""

import torch
import torch.distributed as dist


class GatherIntoFc1(GatherIntoFc1):  # noqa: F821 - the solution's, then changed
    @staticmethod
    def backward(ctx, grad):
        mine, weight = ctx.saved_tensors
        everyone = torch.empty(grad.shape[0], mine.shape[1])
        all_gather_single(everyone, mine)  # noqa: F821 - the setup cell imports it
        partial = grad @ weight
        return partial.chunk(dist.get_world_size())[dist.get_rank()].contiguous(), grad.T @ everyone
