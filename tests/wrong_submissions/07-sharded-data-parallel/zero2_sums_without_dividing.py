"""Reduce_scatters the gradients but never divides the sum by the world size.

replaces: zero2
fails: test_zero2 test_zero2_more
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F


class Zero2AdamW:
    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        self.params = list(params)
        self.lr, self.betas, self.eps, self.wd = lr, betas, eps, weight_decay
        self.n = dist.get_world_size()
        numel = sum(p.numel() for p in self.params)
        self.size = -(-numel // self.n)
        self.low = dist.get_rank() * self.size
        self.padding = self.size * self.n - numel
        flat = F.pad(torch.cat([p.detach().reshape(-1) for p in self.params]), (0, self.padding))
        self.master = flat[self.low : self.low + self.size].clone()
        self.m, self.v, self.t = torch.zeros_like(self.master), torch.zeros_like(self.master), 0

    @torch.no_grad()
    def step(self):
        flat = F.pad(torch.cat([p.grad.reshape(-1) for p in self.params]), (0, self.padding))
        for p in self.params:
            p.grad = None
        g = flat.new_empty(self.size)
        reduce_scatter_single(g, flat)  # noqa: F821 - the setup cell imports it
        self.t += 1
        b1, b2 = self.betas
        self.master.mul_(1 - self.lr * self.wd)
        self.m.lerp_(g, 1 - b1)
        self.v.mul_(b2).addcmul_(g, g, value=1 - b2)
        self.master.addcdiv_(
            self.m, (self.v / (1 - b2**self.t)).sqrt() + self.eps, value=-self.lr / (1 - b1**self.t)
        )
        all_gather_single(flat, self.master)  # noqa: F821 - the setup cell imports it
        offset = 0
        for p in self.params:
            p.copy_(flat[offset : offset + p.numel()].view_as(p))
            offset += p.numel()
