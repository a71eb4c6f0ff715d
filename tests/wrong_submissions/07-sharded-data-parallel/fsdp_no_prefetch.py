"""Gathers each layer when it is needed and waits at once: right values, at most one layer whole,
but no all_gather overlaps any computation.

replaces: fsdp
fails: test_fsdp test_fsdp_more
says: computed before layer 1's all_gather started
"""

import torch


class FSDPMLP(FSDPMLP):  # noqa: F821 - the solution cell defines it
    def prefetch(self, i: int) -> None:
        pass

    def gathered(self, i: int) -> torch.Tensor:
        flat, handle = start_gather(self.shards[i])  # noqa: F821 - the solution cell defines it
        handle.wait()
        return flat
