"""Packs the buckets greedily from the first parameter, not the last: other buckets than DDP's,
each still of consecutive parameters within the cap, and each still sent from the hook of the
last of its gradients to arrive.

replaces: zero2
fails: none
"""

import torch
import torch.distributed as dist


class Zero2AdamW(Zero2AdamW):  # noqa: F821 - the solution cell defines it
    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, bucket_numel=1 << 20):
        self.params = list(params)
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.world_size, self.rank = dist.get_world_size(), dist.get_rank()
        self.buckets = []
        for p in self.params:  # first to last
            if self.buckets and sum(q.numel() for q in self.buckets[-1]) + p.numel() <= bucket_numel:
                self.buckets[-1].append(p)
            else:
                self.buckets.append([p])
        self.sizes = [-(-sum(p.numel() for p in bucket) // self.world_size) for bucket in self.buckets]
        self.offsets = [sum(self.sizes[:b]) for b in range(len(self.buckets))]
        with torch.no_grad():
            self.master = torch.cat(
                [self._mine(b, self._flat(b, bucket)) for b, bucket in enumerate(self.buckets)]
            )
        self.exp_avg = torch.zeros_like(self.master)
        self.exp_avg_sq = torch.zeros_like(self.master)
        self.grad = torch.zeros_like(self.master)
        self.t = 0
        self.filling = {}
        self.arrived = [0] * len(self.buckets)
        for b, bucket in enumerate(self.buckets):
            start = 0
            for p in bucket:
                p.register_post_accumulate_grad_hook(lambda p, b=b, start=start: self._arrive(p, b, start))
                start += p.numel()
