"""Registers a hook on every parameter, frozen ones too, which torch refuses.

replaces: overlap
fails: test_overlap_more
says: cannot register a hook on a tensor that doesn't require gradient
"""

import torch.distributed as dist


class OverlappedSync:
    def __init__(self, model):
        self.handles = []
        for p in model.parameters():
            p.register_post_accumulate_grad_hook(self._start)

    def _start(self, param):
        self.handles.append((param, dist.all_reduce(param.grad, async_op=True)))

    def finish(self):
        for param, handle in self.handles:
            handle.wait()
            param.grad /= dist.get_world_size()
        self.handles = []
