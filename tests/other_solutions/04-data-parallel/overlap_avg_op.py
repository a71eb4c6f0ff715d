"""Averages with ReduceOp.AVG, so that finish() only waits.

replaces: overlap
fails: none
"""

import torch.distributed as dist


class OverlappedSync:
    def __init__(self, model):
        self.work = []
        self.hooks = [
            p.register_post_accumulate_grad_hook(
                lambda p: self.work.append(dist.all_reduce(p.grad, op=dist.ReduceOp.AVG, async_op=True))
            )
            for p in model.parameters()
            if p.requires_grad
        ]

    def finish(self):
        for work in self.work:
            work.wait()
        self.work = []
