"""Keeps every handle from step to step: at the next step finish() waits on the old ones again and
divides their gradients, which by then hold the new step's sums, a second time.

replaces: overlap
fails: test_overlap test_overlap_more
says: divided by the world size once more
"""

import torch.distributed as dist


class OverlappedSync:
    def __init__(self, model):
        self.handles = []
        for p in model.parameters():
            if p.requires_grad:
                p.register_post_accumulate_grad_hook(self._start)

    def _start(self, param):
        self.handles.append((param, dist.all_reduce(param.grad, async_op=True)))

    def finish(self):
        for param, handle in self.handles:
            handle.wait()
            param.grad /= dist.get_world_size()
