"""Divides the gradients without waiting for their all_reduces: they may still be in flight.

replaces: overlap
fails: test_overlap test_overlap_more
says: returned without waiting on 8 of the 8 all_reduce handles
"""

import torch.distributed as dist


class OverlappedSync:
    def __init__(self, model):
        self.params = []
        for p in model.parameters():
            if p.requires_grad:
                p.register_post_accumulate_grad_hook(self._start)

    def _start(self, param):
        dist.all_reduce(param.grad, op=dist.ReduceOp.AVG, async_op=True)
        self.params.append(param)

    def finish(self):
        self.params = []
