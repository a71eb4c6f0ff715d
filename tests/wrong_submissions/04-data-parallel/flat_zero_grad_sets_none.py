"""Clears the gradients with model.zero_grad(), which sets them to None: the next backward makes
new ones, outside the buffer, and the buffer's all_reduce no longer reaches them.

replaces: flat
fails: test_flat test_flat_more
says: Setting .grad to None, as model.zero_grad() does by default
"""

import torch
import torch.distributed as dist


class FlatGradients:
    def __init__(self, model):
        self.model = model
        params = list(model.parameters())
        self.buffer = torch.zeros(sum(p.numel() for p in params), dtype=params[0].dtype)
        offset = 0
        for p in params:
            p.grad = self.buffer[offset : offset + p.numel()].view_as(p)
            offset += p.numel()

    def zero_grad(self):
        self.model.zero_grad()

    def all_reduce(self):
        dist.all_reduce(self.buffer)
        self.buffer /= dist.get_world_size()
