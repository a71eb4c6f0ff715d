"""Gives rank j the heads j, j + world_size, ... but puts the output back as if it had heads j*h/n..:
the heads come back in the wrong order.

replaces: ulysses
fails: test_ulysses test_ulysses_more
says: differs from attention over the whole sequence
"""

import torch
import torch.distributed as dist


def ulysses_attention(rank, world_size, q, k, v, layout, causal):
    heads, rows, dim = q.shape
    if heads % world_size:
        raise ValueError("heads do not divide")
    mine = heads // world_size
    counts = [sum(b - a for a, b in spans) for spans in layout]

    def to_heads(x):
        x = x.view(mine, world_size, rows, dim).transpose(0, 1)  # piece j: heads j, j + n, ...
        received = x.new_empty(sum(counts) * mine * dim)
        dist.all_to_all_single(
            received,
            x.contiguous().view(-1),
            [n * mine * dim for n in counts],
            [mine * rows * dim] * world_size,
        )
        pieces = received.split([n * mine * dim for n in counts])
        return torch.cat([p.view(mine, n, dim) for p, n in zip(pieces, counts, strict=False)], dim=1)

    out = attend(to_heads(q), to_heads(k), to_heads(v), causal)[0]  # noqa: F821
    back = out.new_empty(heads * rows * dim)
    dist.all_to_all_single(
        back,
        torch.cat([p.reshape(-1) for p in out.split(counts, dim=1)]),
        [mine * rows * dim] * world_size,
        [mine * n * dim for n in counts],
    )
    return back.view(heads, rows, dim)
