"""Backward through the token gather keeps this rank's rows of its own gradient, without summing the ranks'.

replaces: sequence
fails: test_sequence test_sequence_more
says: keep this rank's part of the input's gradient, not the ranks' sum
"""

import torch.distributed as dist


class GatherTokens(GatherTokens):  # noqa: F821 - the solution's, then changed
    @staticmethod
    def backward(ctx, grad):
        return grad.chunk(dist.get_world_size())[dist.get_rank()].contiguous()
