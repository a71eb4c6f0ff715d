"""Allocates the buffer with new_zeros on the first parameter, walks the parameters in reverse, and
divides into the buffer itself with an out= argument.

replaces: flat
fails: none
"""

import torch
import torch.distributed as dist


class FlatGradients:
    def __init__(self, model):
        params = list(model.parameters())
        total = sum(p.numel() for p in params)
        self.buffer = params[0].detach().new_zeros(total)
        end = total
        for p in reversed(params):
            p.grad = self.buffer.narrow(0, end - p.numel(), p.numel()).view_as(p)
            end -= p.numel()

    def zero_grad(self):
        self.buffer.mul_(0)

    def all_reduce(self):
        handle = dist.all_reduce(self.buffer, async_op=True)
        handle.wait()
        torch.div(self.buffer, dist.get_world_size(), out=self.buffer)
