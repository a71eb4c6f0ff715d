"""Sends each full bucket with a blocking all_reduce from the hook: in order, during backward, but
backward waits for every bucket's communication before it goes on.

replaces: bucketed
fails: test_bucketed test_bucketed_more
says: a blocking all_reduce, or a wait inside a hook
"""

import torch
import torch.distributed as dist


class BucketedSync:
    def __init__(self, model, buckets):
        params = list(model.parameters())
        self.buckets = [[params[i] for i in bucket] for bucket in buckets]
        self.missing = [len(b) for b in self.buckets]
        self.done = 0
        for b, bucket in enumerate(self.buckets):
            for p in bucket:
                p.register_post_accumulate_grad_hook(lambda param, b=b: self._ready(b))

    def _ready(self, b):
        self.missing[b] -= 1
        while self.done < len(self.buckets) and self.missing[self.done] == 0:
            bucket = self.buckets[self.done]
            flat = torch.cat([p.grad.reshape(-1) for p in bucket])
            dist.all_reduce(flat)
            flat /= dist.get_world_size()
            offset = 0
            for p in bucket:
                p.grad.copy_(flat[offset : offset + p.numel()].view_as(p.grad))
                offset += p.numel()
            self.done += 1

    def finish(self):
        self.missing = [len(b) for b in self.buckets]
        self.done = 0
