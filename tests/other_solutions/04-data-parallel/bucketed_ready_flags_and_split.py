"""Marks each parameter ready by its index, scans the buckets in order from the first not yet
started, sums and divides, and copies back with split; a chained future per bucket does the copy.

replaces: bucketed
fails: none
"""

import torch
import torch.distributed as dist


class BucketedSync:
    def __init__(self, model, buckets):
        self.params = list(model.parameters())
        self.buckets = [list(b) for b in buckets]
        self.ready = set()
        self.started = 0
        self.futures = []
        for i, p in enumerate(self.params):
            if any(i in b for b in self.buckets):
                p.register_post_accumulate_grad_hook(lambda _, i=i: self._ready(i))

    def _ready(self, i):
        self.ready.add(i)
        while self.started < len(self.buckets) and set(self.buckets[self.started]) <= self.ready:
            grads = [self.params[j].grad for j in self.buckets[self.started]]
            flat = torch.cat([g.flatten() for g in grads])
            size = dist.get_world_size()

            def copy_back(done, grads=grads, size=size):
                pieces = done.value()[0].div_(size).split([g.numel() for g in grads])
                for g, piece in zip(grads, pieces, strict=True):
                    g.copy_(piece.view_as(g))

            self.futures.append(dist.all_reduce(flat, async_op=True).get_future().then(copy_back))
            self.started += 1

    def finish(self):
        for future in self.futures:
            future.wait()
        self.ready, self.started, self.futures = set(), 0, []
