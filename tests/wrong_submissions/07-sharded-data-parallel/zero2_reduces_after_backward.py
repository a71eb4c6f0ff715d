"""Its hooks only copy the gradients into their buckets; every bucket is reduce_scattered in
step(), after backward: the whole gradient waits in the buckets until then.

replaces: zero2
fails: test_zero2 test_zero2_more
says: not after it (in step())
"""

import torch


class Zero2AdamW(Zero2AdamW):  # noqa: F821 - the solution cell defines it
    @torch.no_grad()
    def _arrive(self, p, b, start):
        if b not in self.filling:
            self.filling[b] = p.grad.new_zeros(self.sizes[b] * self.world_size)
        self.filling[b][start : start + p.numel()] = p.grad.reshape(-1)
        p.grad = None

    @torch.no_grad()
    def step(self):
        for b in sorted(self.filling):
            piece = self.grad[self.offsets[b] : self.offsets[b] + self.sizes[b]]
            reduce_scatter_single(piece, self.filling.pop(b))  # noqa: F821 - the setup cell imports it
        super().step()
