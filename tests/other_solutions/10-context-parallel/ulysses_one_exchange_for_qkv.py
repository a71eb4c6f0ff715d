"""Ulysses with Q, K and V stacked and sent in one all_to_all_single (three exchanges in one).

replaces: ulysses
fails: none
"""

import torch
import torch.distributed as dist


def ulysses_attention(rank, world_size, q, k, v, layout, causal):
    heads, rows, dim = q.shape
    if heads % world_size:
        raise ValueError(f"{heads} heads cannot be shared out among {world_size} ranks")
    counts = [sum(b - a for a, b in spans) for spans in layout]
    mine = heads // world_size
    qkv = torch.stack([q, k, v]).view(3, world_size, mine, rows, dim).transpose(0, 1).contiguous()
    received = q.new_empty(3 * mine * sum(counts) * dim)
    dist.all_to_all_single(
        received, qkv.view(-1), [3 * mine * n * dim for n in counts], [3 * mine * rows * dim] * world_size
    )
    pieces = received.split([3 * mine * n * dim for n in counts])
    whole = torch.cat([p.view(3, mine, n, dim) for p, n in zip(pieces, counts, strict=True)], dim=2)
    out = attend(whole[0], whole[1], whole[2], causal)[0]  # noqa: F821 - a locked cell defines it
    back = out.new_empty(heads * rows * dim)
    dist.all_to_all_single(
        back,
        torch.cat([p.reshape(-1) for p in out.split(counts, dim=1)]),
        [mine * rows * dim] * world_size,
        [mine * n * dim for n in counts],
    )
    return back.view(heads, rows, dim)
