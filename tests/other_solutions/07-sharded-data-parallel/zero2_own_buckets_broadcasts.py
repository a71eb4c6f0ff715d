"""Written from scratch: buckets made from the last parameter back (the order backward makes
their gradients), the moments in one dict, gradients copied in as they arrive, each bucket
averaged with ReduceOp.AVG; after the update each rank broadcasts its piece of every bucket (the
bytes of one all_gather).

replaces: zero2
fails: none
"""

import torch
import torch.distributed as dist


class Zero2AdamW:
    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, bucket_numel=1 << 20):
        self.params, self.lr, self.betas, self.eps, self.wd = list(params), lr, betas, eps, weight_decay
        self.n, self.rank = dist.get_world_size(), dist.get_rank()
        self.buckets, current = [], []
        for i in range(len(self.params) - 1, -1, -1):
            if (
                current
                and sum(self.params[j].numel() for j in current) + self.params[i].numel() > bucket_numel
            ):
                self.buckets.append(current)
                current = []
            current.append(i)
        if current:
            self.buckets.append(current)
        self.where = {}
        for b, bucket in enumerate(self.buckets):
            start = 0
            for i in bucket:
                self.where[i] = (b, start)
                start += self.params[i].numel()
        self.size = [-(-sum(self.params[i].numel() for i in bucket) // self.n) for bucket in self.buckets]
        self.state = {}
        for b, bucket in enumerate(self.buckets):
            flat = torch.zeros(self.size[b] * self.n)
            for i in bucket:
                _, start = self.where[i]
                flat[start : start + self.params[i].numel()] = self.params[i].detach().flatten()
            theta = flat[self.rank * self.size[b] : (self.rank + 1) * self.size[b]].clone()
            self.state[b] = {"theta": theta, "m": torch.zeros_like(theta), "v": torch.zeros_like(theta)}
        self.t, self.open, self.count = 0, {}, {}
        for i, p in enumerate(self.params):
            p.register_post_accumulate_grad_hook(lambda p, i=i: self.ready(i, p))

    @torch.no_grad()
    def ready(self, i, p):
        b, start = self.where[i]
        flat = self.open.setdefault(b, torch.zeros(self.size[b] * self.n))
        flat[start : start + p.numel()] = p.grad.flatten()
        p.grad = None
        self.count[b] = self.count.get(b, 0) + 1
        if self.count[b] == len(self.buckets[b]):
            self.count[b] = 0
            g = torch.empty(self.size[b])
            dist.reduce_scatter(g, list(self.open.pop(b).split(self.size[b])), op=dist.ReduceOp.AVG)
            self.state[b]["g"] = g

    @torch.no_grad()
    def step(self):
        self.t += 1
        b1, b2 = self.betas
        for b, bucket in enumerate(self.buckets):
            s = self.state[b]
            g = s.pop("g")
            s["theta"] *= 1 - self.lr * self.wd
            s["m"] = b1 * s["m"] + (1 - b1) * g
            s["v"] = b2 * s["v"] + (1 - b2) * g * g
            step = (s["m"] / (1 - b1**self.t)) / ((s["v"] / (1 - b2**self.t)).sqrt() + self.eps)
            s["theta"] -= self.lr * step
            pieces = [
                s["theta"].clone() if r == self.rank else torch.empty(self.size[b]) for r in range(self.n)
            ]
            for r in range(self.n):
                dist.broadcast(pieces[r], src=r)
            flat = torch.cat(pieces)
            for i in bucket:
                _, start = self.where[i]
                p = self.params[i]
                p.copy_(flat[start : start + p.numel()].view_as(p))
