"""Copies each bucket into a float32 buffer, whatever the gradients' dtype: a float64 model's
gradients come back rounded to float32.

replaces: bucketed
fails: test_bucketed_more
says: was it reduced in float32?
"""

import torch
import torch.distributed as dist


class BucketedSync:
    def __init__(self, model, buckets):
        params = list(model.parameters())
        self.buckets = [[params[i] for i in bucket] for bucket in buckets]
        self.missing = [len(b) for b in self.buckets]
        self.started = []
        for b, bucket in enumerate(self.buckets):
            for p in bucket:
                p.register_post_accumulate_grad_hook(lambda param, b=b: self._ready(b))

    def _ready(self, b):
        self.missing[b] -= 1
        while len(self.started) < len(self.buckets) and self.missing[len(self.started)] == 0:
            i = len(self.started)
            flat = torch.zeros(sum(p.numel() for p in self.buckets[i]))  # float32
            flat.copy_(torch.cat([p.grad.reshape(-1) for p in self.buckets[i]]))
            self.started.append((i, flat, dist.all_reduce(flat, async_op=True)))

    def finish(self):
        for b, flat, handle in self.started:
            handle.wait()
            flat /= dist.get_world_size()
            offset = 0
            for p in self.buckets[b]:
                p.grad.copy_(flat[offset : offset + p.numel()].view_as(p.grad))
                offset += p.numel()
        self.missing = [len(b) for b in self.buckets]
        self.started = []
