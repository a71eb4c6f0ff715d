"""Registers the hooks again in finish(), for the next step, as if a hook ran only once: from the
second step on, every gradient is all_reduced twice.

replaces: overlap
fails: test_overlap test_overlap_more
says: expected one per parameter
"""

import torch.distributed as dist


class OverlappedSync:
    def __init__(self, model):
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.handles = []
        self._arm()

    def _arm(self):
        for p in self.params:
            p.register_post_accumulate_grad_hook(self._start)

    def _start(self, param):
        self.handles.append((param, dist.all_reduce(param.grad, async_op=True)))

    def finish(self):
        for _, handle in self.handles:
            handle.wait()
        for param in {id(p): p for p, _ in self.handles}.values():
            param.grad /= dist.get_world_size()
        self.handles = []
        self._arm()
