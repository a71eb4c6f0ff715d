"""All-reduces the buffer and leaves the sum over the ranks in it, not the average.

replaces: flat
fails: test_flat test_flat_more
says: It is the sum over the ranks
"""

import torch
import torch.distributed as dist


class FlatGradients:
    def __init__(self, model):
        params = list(model.parameters())
        self.buffer = torch.zeros(sum(p.numel() for p in params), dtype=params[0].dtype)
        offset = 0
        for p in params:
            p.grad = self.buffer[offset : offset + p.numel()].view_as(p)
            offset += p.numel()

    def zero_grad(self):
        self.buffer.zero_()

    def all_reduce(self):
        dist.all_reduce(self.buffer)
