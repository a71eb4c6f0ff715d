"""Starts each bucket as soon as its own gradients are final, whatever the buckets before it: the
ranks may then issue their buckets in different orders, and NCCL pairs them wrongly or hangs.

replaces: bucketed
fails: test_bucketed_more
says: Bucket i may start only once buckets 0 to i-1 have
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
        if self.missing[b] == 0:
            flat = torch.cat([p.grad.reshape(-1) for p in self.buckets[b]])
            self.started.append((b, flat, dist.all_reduce(flat, async_op=True)))

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
