"""Keeps Adam's moments for its shard only, but an fp32 master copy of every parameter.

replaces: zero1
fails: test_zero1 test_zero1_more
says: a whole flat copy of the parameters or gradients
"""

import torch
import torch.nn.functional as F


class Zero1AdamW(Zero1AdamW):  # noqa: F821 - the solution cell defines it
    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, lr, betas, eps, weight_decay)
        with torch.no_grad():
            self.whole = F.pad(torch.cat([p.reshape(-1) for p in self.params]), (0, self.padding))
        self.master = self.whole[self.low : self.low + self.shard_size]  # a view of the whole copy
