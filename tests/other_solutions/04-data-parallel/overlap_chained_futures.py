"""Chains the division onto each all_reduce's future with then(), and waits on the chained futures.

replaces: overlap
fails: none
"""

import torch.distributed as dist


class OverlappedSync:
    def __init__(self, model):
        self.pending = []
        for p in model.parameters():
            if p.requires_grad:
                p.register_post_accumulate_grad_hook(self._start)

    def _start(self, param):
        size = dist.get_world_size()
        future = dist.all_reduce(param.grad, async_op=True).get_future()
        self.pending.append(future.then(lambda done: done.value()[0].div_(size)))

    def finish(self):
        while self.pending:
            self.pending.pop().wait()
