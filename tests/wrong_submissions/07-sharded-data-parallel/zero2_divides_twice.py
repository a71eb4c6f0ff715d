"""Reduce_scatters with ReduceOp.AVG, which averages already, then divides by the world size
again.

replaces: zero2
fails: test_zero2 test_zero2_more
says: divide by the world size twice
"""

import torch
import torch.distributed as dist


class Zero2AdamW(Zero2AdamW):  # noqa: F821 - the solution cell defines it
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
            dist.reduce_scatter(piece, list(self.filling.pop(b).chunk(self.world_size)), op=dist.ReduceOp.AVG)
