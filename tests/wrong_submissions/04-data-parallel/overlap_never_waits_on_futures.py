"""Takes each handle's future, through a name imported from torch.distributed, and never waits on
it: the gradients may still be in flight when finish() divides them.

replaces: overlap
fails: test_overlap test_overlap_more
says: returned without waiting on 8 of the 8 all_reduce handles
"""

from torch.distributed import all_reduce, get_world_size


class OverlappedSync:
    def __init__(self, model):
        self.futures = []
        for p in model.parameters():
            if p.requires_grad:
                p.register_post_accumulate_grad_hook(self._start)

    def _start(self, param):
        self.futures.append((param, all_reduce(param.grad, async_op=True).get_future()))

    def finish(self):
        for param, _future in self.futures:
            param.grad /= get_world_size()  # without waiting on the future
        self.futures = []
