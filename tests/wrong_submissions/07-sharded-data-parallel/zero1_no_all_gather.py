"""Updates its own shard into the parameters, and never shares it with the other ranks.

replaces: zero1
fails: test_zero1 test_zero1_more
says: it never shared its updated shard
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F


class Zero1AdamW:
    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        self.params = list(params)
        self.lr, self.betas, self.eps, self.wd = lr, betas, eps, weight_decay
        numel = sum(p.numel() for p in self.params)
        self.size = -(-numel // dist.get_world_size())
        self.low = dist.get_rank() * self.size
        self.padding = self.size * dist.get_world_size() - numel
        flat = F.pad(torch.cat([p.detach().reshape(-1) for p in self.params]), (0, self.padding))
        self.master = flat[self.low : self.low + self.size].clone()
        self.m, self.v, self.t = torch.zeros_like(self.master), torch.zeros_like(self.master), 0

    @torch.no_grad()
    def step(self):
        flat = F.pad(torch.cat([p.grad.reshape(-1) for p in self.params]), (0, self.padding))
        g = flat[self.low : self.low + self.size]
        self.t += 1
        b1, b2 = self.betas
        self.master.mul_(1 - self.lr * self.wd)
        self.m.lerp_(g, 1 - b1)
        self.v.mul_(b2).addcmul_(g, g, value=1 - b2)
        self.master.addcdiv_(
            self.m, (self.v / (1 - b2**self.t)).sqrt() + self.eps, value=-self.lr / (1 - b1**self.t)
        )
        params = F.pad(torch.cat([p.reshape(-1) for p in self.params]), (0, self.padding))
        params[self.low : self.low + self.size] = self.master  # only this rank's part is new
        offset = 0
        for p in self.params:
            p.copy_(params[offset : offset + p.numel()].view_as(p))
            offset += p.numel()
