"""How a sequence is split over context-parallel ranks: layouts of spans, and the attention every
check compares with.

A *layout* lists, for each rank, the spans ``(start, stop)`` of token positions it holds, in the
order its rows hold them: ``[[(0, 4)], [(4, 8)]]`` is the contiguous split of 8 tokens over 2 ranks.
"""

from __future__ import annotations

import math

import torch

Layout = list[list[tuple[int, int]]]


def chunk_bounds(seq_len: int, chunks: int) -> list[tuple[int, int]]:
    """``seq_len`` positions cut into ``chunks`` spans as even as can be, the first ``seq_len %
    chunks`` one longer (as ``torch.tensor_split`` cuts)."""
    base, extra = divmod(seq_len, chunks)
    bounds, start = [], 0
    for c in range(chunks):
        stop = start + base + (1 if c < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def contiguous_layout(seq_len: int, world_size: int) -> Layout:
    """Rank r holds the r-th of ``world_size`` consecutive spans."""
    return [[span] for span in chunk_bounds(seq_len, world_size)]


def reference_zigzag_layout(seq_len: int, world_size: int) -> Layout:
    """Rank i holds chunks i and 2 world_size - 1 - i of 2 world_size."""
    chunks = chunk_bounds(seq_len, 2 * world_size)
    return [[chunks[i], chunks[2 * world_size - 1 - i]] for i in range(world_size)]


def take(x: torch.Tensor, spans: list[tuple[int, int]]) -> torch.Tensor:
    """The rows of ``x`` (positions on dimension -2) in ``spans``, in their order."""
    return torch.cat([x[..., a:b, :] for a, b in spans], dim=-2)


def positions(spans: list[tuple[int, int]]) -> list[int]:
    return [p for a, b in spans for p in range(a, b)]


def reference_unshard(shards: list[torch.Tensor], layout: Layout) -> torch.Tensor:
    """The inverse of ``take``: each rank's rows put back at their positions."""
    seq_len = sum(b - a for spans in layout for a, b in spans)
    first = shards[0]
    out = first.new_zeros(*first.shape[:-2], seq_len, first.shape[-1])
    for shard, spans in zip(shards, layout, strict=True):
        out[..., positions(spans), :] = shard
    return out


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> tuple:
    """Softmax attention of whole sequences, and each row's log-sum-exp of its scaled scores."""
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[-2]
        scores = scores.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    return torch.softmax(scores, dim=-1) @ v, lse


def visible_pairs(layout: Layout, rank: int, causal: bool) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """The (query span, key span) pairs of ``rank`` that a causal mask does not hide entirely, over
    every rank's spans: a key span that starts after the query span's start is all in its future
    (spans of a layout never overlap)."""
    keys = [span for spans in layout for span in spans]
    return [(q, k) for q in layout[rank] for k in keys if not causal or k[0] <= q[0]]


def block_flops(layout: Layout, rank: int, causal: bool, heads: int, dim: int) -> int:
    """The matmul FLOPs of ``rank``'s visible pairs: QK^T and PV, 2 h |q| |k| d each."""
    pairs = visible_pairs(layout, rank, causal)
    return sum(4 * heads * (q[1] - q[0]) * (k[1] - k[0]) * dim for q, k in pairs)
