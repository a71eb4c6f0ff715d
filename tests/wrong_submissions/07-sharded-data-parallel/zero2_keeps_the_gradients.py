"""Reduce_scatters each bucket during backward, but leaves every parameter's whole gradient in
.grad.

replaces: zero2
fails: test_zero2 test_zero2_more
says: some parameters still hold a .grad
"""

import torch


class Zero2AdamW(Zero2AdamW):  # noqa: F821 - the solution cell defines it
    @torch.no_grad()
    def _arrive(self, p, b, start):
        if b not in self.filling:
            self.filling[b] = p.grad.new_zeros(self.sizes[b] * self.world_size)
        self.filling[b][start : start + p.numel()] = p.grad.reshape(-1)
        self.arrived[b] += 1
        if self.arrived[b] == len(self.buckets[b]):
            self.arrived[b] = 0
            piece = self.grad[self.offsets[b] : self.offsets[b] + self.sizes[b]]
            reduce_scatter_single(piece, self.filling.pop(b))  # noqa: F821 - the setup cell imports it
