"""Keeps its master copy as a slice of the padded flat buffer of every parameter, without copying
it: the slice is a view, so the rank keeps the whole flat buffer between steps, not 1/n of it.

replaces: zero1
fails: test_zero1 test_zero1_more
says: whole flat copy
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F


class Zero1AdamW(Zero1AdamW):  # noqa: F821 - the solution cell defines it
    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        self.params = list(params)
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.world_size, self.rank = dist.get_world_size(), dist.get_rank()
        numel = sum(p.numel() for p in self.params)
        self.shard_size = -(-numel // self.world_size)
        self.padding = self.shard_size * self.world_size - numel
        self.low = self.rank * self.shard_size
        with torch.no_grad():
            flat = F.pad(torch.cat([p.reshape(-1) for p in self.params]), (0, self.padding))
            self.master = flat[self.low : self.low + self.shard_size]  # a view: all of flat stays
        self.exp_avg = torch.zeros_like(self.master)
        self.exp_avg_sq = torch.zeros_like(self.master)
        self.t = 0
