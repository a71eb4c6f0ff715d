"""Builds a small synchroniser object per call with a no_sync flag, like DDP's, and steps with
torch.optim.SGD.

replaces: accumulate
fails: none
"""

import contextlib

import torch
import torch.distributed as dist


class _Sync:
    def __init__(self, model):
        self.syncing, self.handles = True, []
        self.hooks = [
            p.register_post_accumulate_grad_hook(self._start) for p in model.parameters() if p.requires_grad
        ]

    def _start(self, param):
        if self.syncing:
            self.handles.append((param, dist.all_reduce(param.grad, async_op=True)))

    @contextlib.contextmanager
    def no_sync(self):
        self.syncing = False
        try:
            yield
        finally:
            self.syncing = True

    def finish(self):
        for param, handle in self.handles:
            handle.wait()
            param.grad /= dist.get_world_size()
        for hook in self.hooks:
            hook.remove()


def accumulate_and_step(model, micro_batches, lr):
    sync = _Sync(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    optimizer.zero_grad()
    *early, last = micro_batches
    with sync.no_sync():
        for inputs, targets in early:
            (mse(model(inputs), targets) / len(micro_batches)).backward()  # noqa: F821
    (mse(model(last[0]), last[1]) / len(micro_batches)).backward()  # noqa: F821
    sync.finish()
    optimizer.step()
