"""Keeps the last two buckets it sent alive, each a whole flat bucket of gradients: a few buckets
more than needed, under the bound on the peak but not under the rule that no bucket outlives its
send.

replaces: zero2
fails: test_zero2 test_zero2_more
says: Keep no bucket once it is sent
"""

import torch


class Zero2AdamW(Zero2AdamW):  # noqa: F821
    @torch.no_grad()
    def _arrive(self, p, b, start):
        if b not in self.filling:
            self.filling[b] = p.grad.new_zeros(self.sizes[b] * self.world_size)
        self.filling[b][start : start + p.numel()] = p.grad.reshape(-1)
        p.grad = None
        self.arrived[b] += 1
        if self.arrived[b] == len(self.buckets[b]):
            self.arrived[b] = 0
            piece = self.grad[self.offsets[b] : self.offsets[b] + self.sizes[b]]
            full = self.filling.pop(b)
            reduce_scatter_single(piece, full)  # noqa: F821
            kept = getattr(self, "kept", [])
            self.kept = (kept + [full])[-2:]

    def step(self):
        self.kept = []
        super().step()
