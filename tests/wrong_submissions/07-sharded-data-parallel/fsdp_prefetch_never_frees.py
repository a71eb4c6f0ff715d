"""Prefetches the next layer, but keeps every gathered layer in its dictionary of pending gathers:
after a few layers, every layer is whole on every rank.

replaces: fsdp
fails: test_fsdp test_fsdp_more
says: were alive at once
"""

import torch


class FSDPMLP(FSDPMLP):  # noqa: F821 - the solution cell defines it
    def gathered(self, i: int) -> torch.Tensor:
        self.prefetch(i)
        flat, handle = self.pending[i]  # not popped: the next step finds it there, stale too
        handle.wait()
        return flat
