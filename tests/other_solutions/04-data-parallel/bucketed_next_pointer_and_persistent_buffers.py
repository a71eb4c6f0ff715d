"""Keeps a persistent flat buffer per bucket (copied into, not concatenated), a set of the
parameters still to come, a pointer to the next bucket to start, ReduceOp.AVG, and waits with
torch.futures.wait_all.

replaces: bucketed
fails: none
"""

import torch
import torch.distributed as dist


class BucketedSync:
    def __init__(self, model, buckets):
        params = list(model.parameters())
        self.buckets = [[params[i] for i in bucket] for bucket in buckets]
        self.flats = [torch.zeros(sum(p.numel() for p in b), dtype=b[0].dtype) for b in self.buckets]
        self.waiting = [set(map(id, b)) for b in self.buckets]
        self.next, self.futures = 0, []
        for bucket in self.buckets:
            for p in bucket:
                p.register_post_accumulate_grad_hook(self._arrived)

    def _arrived(self, param):
        for waiting in self.waiting:
            waiting.discard(id(param))
        while self.next < len(self.buckets) and not self.waiting[self.next]:
            flat, offset = self.flats[self.next], 0
            for p in self.buckets[self.next]:
                flat[offset : offset + p.numel()].copy_(p.grad.reshape(-1))
                offset += p.numel()
            work = dist.all_reduce(flat, op=dist.ReduceOp.AVG, async_op=True)
            self.futures.append(work.get_future())
            self.next += 1

    def finish(self):
        torch.futures.wait_all(self.futures)
        for bucket, flat in zip(self.buckets, self.flats, strict=True):
            offset = 0
            for p in bucket:
                p.grad.copy_(flat[offset : offset + p.numel()].view_as(p))
                offset += p.numel()
        self.waiting = [set(map(id, b)) for b in self.buckets]
        self.next, self.futures = 0, []
