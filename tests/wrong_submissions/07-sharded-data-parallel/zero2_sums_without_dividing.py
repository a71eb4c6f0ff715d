"""Reduce_scatters the buckets during backward but never divides the sum by the world size.

replaces: zero2
fails: test_zero2 test_zero2_more
says: without dividing by the world size
"""

import torch


class Zero2AdamW(Zero2AdamW):  # noqa: F821 - the solution cell defines it
    @torch.no_grad()
    def step(self):
        self.grad *= self.world_size  # the solution divides by the world size: undo it
        super().step()
