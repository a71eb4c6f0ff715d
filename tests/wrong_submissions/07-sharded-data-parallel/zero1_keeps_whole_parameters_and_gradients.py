"""Shards Adam's moments, but keeps a whole flat copy of the parameters and one of the gradients from
step to step: twice the whole model in fp32 on every rank.

replaces: zero1
fails: test_zero1 test_zero1_more
says: whole flat copies (of the parameters, the gradients or the moments?)
"""

import torch
import torch.nn.functional as F


class Zero1AdamW(Zero1AdamW):  # noqa: F821 - the solution cell defines it
    def step(self):
        with torch.no_grad():
            self.kept_grads = F.pad(torch.cat([p.grad.reshape(-1) for p in self.params]), (0, self.padding))
            self.kept_params = F.pad(torch.cat([p.reshape(-1) for p in self.params]), (0, self.padding))
        super().step()
