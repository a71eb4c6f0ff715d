"""Starts a bucket when the hook of its lowest-listed parameter runs, taking for granted that
gradients become final in the reverse of the order model.parameters() lists them: true of a
Sequential, not of a model whose layers run in another order than they are registered.

replaces: bucketed
fails: test_bucketed_more
says: gradients can become final in another order than the buckets list them
"""

import torch
import torch.distributed as dist


class BucketedSync:
    def __init__(self, model, buckets):
        params = list(model.parameters())
        self.buckets = [[params[i] for i in bucket] for bucket in buckets]
        self.started = []
        for b, bucket in enumerate(buckets):
            lowest = params[min(bucket)]
            lowest.register_post_accumulate_grad_hook(lambda param, b=b: self._start(b))

    def _start(self, b):
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
        self.started = []
