"""Chunks from torch.tensor_split of the positions; the inverse by index_copy along the positions.

replaces: zigzag
fails: none
"""

import torch


def zigzag_layout(seq_len, world_size):
    chunks = torch.tensor_split(torch.arange(seq_len), 2 * world_size)
    spans = [(int(c[0]), int(c[-1]) + 1) if len(c) else None for c in chunks]
    start = 0
    for i, c in enumerate(chunks):  # an empty chunk sits where the previous one stopped
        spans[i] = (start, start + len(c))
        start += len(c)
    return [[spans[i], spans[2 * world_size - 1 - i]] for i in range(world_size)]


def unshard(shards, layout):
    index = torch.tensor([p for spans in layout for a, b in spans for p in range(a, b)], dtype=torch.long)
    rows = torch.cat(shards, dim=-2)
    return torch.zeros_like(rows).index_copy(rows.dim() - 2, index, rows)
