"""Divides each gradient by the world size in its hook, before the all_reduce starts, so that the
sum is already the average; keeps the handles in a dict by parameter.

replaces: overlap
fails: none
"""

import torch.distributed as dist


class OverlappedSync:
    def __init__(self, model):
        self.handles = {}
        for name, p in model.named_parameters():
            if p.requires_grad:
                p.register_post_accumulate_grad_hook(lambda param, name=name: self._start(name, param))

    def _start(self, name, param):
        param.grad.div_(dist.get_world_size())
        self.handles[name] = dist.all_reduce(param.grad, async_op=True)

    def finish(self):
        for handle in self.handles.values():
            handle.wait()
        self.handles.clear()
