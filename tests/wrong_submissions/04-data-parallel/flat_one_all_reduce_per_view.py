"""Keeps the gradients as views into one buffer, then all_reduces each view on its own: one fixed
cost per tensor, which the flat buffer exists to pay once.

replaces: flat
fails: test_flat test_flat_more
says: issued 8 all_reduces
"""

import torch
import torch.distributed as dist


class FlatGradients:
    def __init__(self, model):
        self.params = list(model.parameters())
        self.buffer = torch.zeros(sum(p.numel() for p in self.params), dtype=self.params[0].dtype)
        offset = 0
        for p in self.params:
            p.grad = self.buffer[offset : offset + p.numel()].view_as(p)
            offset += p.numel()

    def zero_grad(self):
        self.buffer.zero_()

    def all_reduce(self):
        for p in self.params:
            dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
