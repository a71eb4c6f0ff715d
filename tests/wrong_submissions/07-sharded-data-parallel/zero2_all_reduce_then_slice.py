"""All_reduces each full bucket during backward, then keeps its piece: twice a reduce_scatter's
bytes.

replaces: zero2
fails: test_zero2 test_zero2_more
says: An all_reduce then a slice sends twice the bytes
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
            flat = self.filling.pop(b)
            dist.all_reduce(flat)
            self.grad[self.offsets[b] : self.offsets[b] + self.sizes[b]] = self._mine(b, flat)
