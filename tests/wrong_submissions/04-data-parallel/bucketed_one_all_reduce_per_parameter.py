"""Waits for each bucket to fill, then still sends its gradients one all_reduce each.

replaces: bucketed
fails: test_bucketed test_bucketed_more
says: That is one all_reduce per parameter
"""

import torch.distributed as dist


class BucketedSync:
    def __init__(self, model, buckets):
        params = list(model.parameters())
        self.buckets = [[params[i] for i in bucket] for bucket in buckets]
        self.waiting, self.handles = {}, []
        for b, bucket in enumerate(self.buckets):
            for p in bucket:
                p.register_post_accumulate_grad_hook(lambda param, b=b: self._ready(b))

    def _ready(self, b):
        self.waiting[b] = self.waiting.get(b, len(self.buckets[b])) - 1
        if self.waiting[b] == 0:
            for p in self.buckets[b]:
                self.handles.append((p, dist.all_reduce(p.grad, async_op=True)))

    def finish(self):
        for p, handle in self.handles:
            handle.wait()
            p.grad /= dist.get_world_size()
        self.handles, self.waiting = [], {}
