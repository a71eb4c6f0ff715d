"""Gathers every rank's rows of q, k and v with all_gather and computes its heads over them.

replaces: ulysses
fails: test_ulysses test_ulysses_more
says: Ulysses moves data with all_to_all only
"""

import torch
import torch.distributed as dist


def ulysses_attention(rank, world_size, q, k, v, layout, causal):
    heads, rows, dim = q.shape
    if heads % world_size:
        raise ValueError("heads do not divide")
    counts = [sum(b - a for a, b in spans) for spans in layout]
    whole = []
    for x in (q, k, v):
        parts = [x.new_empty(heads, n, dim) for n in counts]
        dist.all_gather(parts, x.contiguous())
        whole.append(torch.cat(parts, dim=1))
    out = attend(*whole, causal)[0]  # noqa: F821 - a locked cell defines it
    start = sum(counts[:rank])
    return out[:, start : start + rows]
