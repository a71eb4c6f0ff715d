"""Leaves the gradients where autograd puts them and, each step, concatenates them into a new flat
buffer, all_reduces it and copies the average back: one all_reduce, but a buffer allocated and
two copies of every gradient per step.

replaces: flat
fails: test_flat test_flat_more
says: every parameter's .grad a contiguous slice of it
"""

import torch
import torch.distributed as dist


class FlatGradients:
    def __init__(self, model):
        self.model = model

    def zero_grad(self):
        self.model.zero_grad()

    def all_reduce(self):
        grads = [p.grad for p in self.model.parameters()]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= dist.get_world_size()
        offset = 0
        for g in grads:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()
