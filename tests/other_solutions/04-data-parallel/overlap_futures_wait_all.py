"""Keeps each handle's future and waits on all of them at once with torch.futures.wait_all.

replaces: overlap
fails: none
"""

import torch
import torch.distributed as dist


class OverlappedSync:
    def __init__(self, model):
        self.params, self.futures = [], []
        for p in model.parameters():
            if p.requires_grad:
                p.register_post_accumulate_grad_hook(self._start)

    def _start(self, param):
        self.params.append(param)
        self.futures.append(dist.all_reduce(param.grad, async_op=True).get_future())

    def finish(self):
        torch.futures.wait_all(self.futures)
        for param in self.params:
            param.grad.div_(dist.get_world_size())
        self.params, self.futures = [], []
