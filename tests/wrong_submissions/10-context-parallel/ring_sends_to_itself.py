"""Runs the ring's sends even at world size 1, where the only rank would send to itself.

replaces: ring
fails: test_ring_more
says: A rank sent to itself
"""

import torch
import torch.distributed as dist

_ring = ring_attention  # noqa: F821 - the solution cell above defines it


def ring_attention(rank, world_size, q, k, v, layout, causal):
    if world_size == 1:
        received = torch.empty_like(k)
        reqs = [dist.isend(k, 0), dist.irecv(received, 0)]
        for r in reqs:
            r.wait()
    return _ring(rank, world_size, q, k, v, layout, causal)
