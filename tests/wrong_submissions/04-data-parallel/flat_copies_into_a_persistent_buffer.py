"""Keeps one persistent buffer, but copies the gradients into it and the average back out each
step: nothing allocated, yet the gradients are not views into it, and each is copied twice.

replaces: flat
fails: test_flat test_flat_more
says: every parameter's .grad a contiguous slice of it
"""

import torch
import torch.distributed as dist


class FlatGradients:
    def __init__(self, model):
        self.params = list(model.parameters())
        self.buffer = torch.zeros(sum(p.numel() for p in self.params), dtype=self.params[0].dtype)

    def zero_grad(self):
        for p in self.params:
            if p.grad is not None:
                p.grad.zero_()

    def all_reduce(self):
        offset = 0
        for p in self.params:
            self.buffer[offset : offset + p.numel()].copy_(p.grad.reshape(-1))
            offset += p.numel()
        dist.all_reduce(self.buffer)
        self.buffer /= dist.get_world_size()
        offset = 0
        for p in self.params:
            p.grad.copy_(self.buffer[offset : offset + p.numel()].view_as(p))
            offset += p.numel()
