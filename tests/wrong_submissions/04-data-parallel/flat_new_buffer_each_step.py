"""Makes a new zeroed buffer, and new views into it, at every zero_grad(): right values, but a
buffer allocated per step.

replaces: flat
fails: test_flat test_flat_more
says: or to a new tensor makes backward allocate a new one
"""

import torch
import torch.distributed as dist


class FlatGradients:
    def __init__(self, model):
        self.params = list(model.parameters())
        self.zero_grad()

    def zero_grad(self):
        self.buffer = torch.zeros(sum(p.numel() for p in self.params), dtype=self.params[0].dtype)
        offset = 0
        for p in self.params:
            p.grad = self.buffer[offset : offset + p.numel()].view_as(p)
            offset += p.numel()

    def all_reduce(self):
        dist.all_reduce(self.buffer)
        self.buffer /= dist.get_world_size()
