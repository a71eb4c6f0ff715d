"""Copies every gradient into its bucket as it arrives, but reduce_scatters the buckets only at
the last gradient's hook: still during backward, yet the whole gradient is alive at once.

replaces: zero2
fails: test_zero2 test_zero2_more
says: the whole fp32 gradient is
"""

import torch


class Zero2AdamW(Zero2AdamW):  # noqa: F821 - the solution cell defines it
    @torch.no_grad()
    def _arrive(self, p, b, start):
        if b not in self.filling:
            self.filling[b] = p.grad.new_zeros(self.sizes[b] * self.world_size)
        self.filling[b][start : start + p.numel()] = p.grad.reshape(-1)
        p.grad = None
        self.arrived[b] += 1
        if sum(self.arrived) == len(self.params):
            self.arrived = [0] * len(self.buckets)
            for bucket in sorted(self.filling):
                piece = self.grad[self.offsets[bucket] : self.offsets[bucket] + self.sizes[bucket]]
                reduce_scatter_single(piece, self.filling.pop(bucket))  # noqa: F821 - the setup cell imports it
