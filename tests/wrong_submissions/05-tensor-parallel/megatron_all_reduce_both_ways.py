"""Makes g all_reduce in the backward pass too, where the output's gradient is already whole.

replaces: megatron
fails: test_mlp test_mlp_more
says: the backward pass issued 2 all_reduces; expected one
"""

import torch.distributed as dist


class ReduceFromParallel(ReduceFromParallel):  # noqa: F821 - the solution's, then changed
    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad
