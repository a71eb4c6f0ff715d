"""Notebook 05's check of attention with its heads split across the ranks, and the unsharded
attention it compares with."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from ..checks import counted, fail, fresh_seed, private_generator, run_ranks
from ..comm import CommLog
from .shards import _carried, _counts, _expect, _shared

# -- exercise: attention with its heads split across the ranks -----------------------------------

ATTENTION_DIM, HEADS = 24, 12  # head dimension 2; 12 heads divide among 1, 2, 3 or 4 ranks


def reference_attention(
    x: torch.Tensor,
    wq: torch.Tensor,
    wk: torch.Tensor,
    wv: torch.Tensor,
    wo: torch.Tensor,
    heads: int,
    scaled: bool = True,
    over: int = -1,
    mixed: bool = False,
) -> torch.Tensor:
    """Multi-head self-attention without masks or biases; weights in nn.Linear's (out, in) layout,
    head i owning rows i * head_dim ... of wq, wk and wv, and the same columns of wo. (``scaled``
    ``over``, the softmax's dimension, and ``mixed``, heads split by a reshape to (batch, heads,
    seq, d) that mixes tokens and heads, are there to recognise three usual mistakes.)"""
    batch, seq, _ = x.shape

    def split(t: torch.Tensor) -> torch.Tensor:  # (batch, seq, heads * d) -> (batch, heads, seq, d)
        if mixed:
            return t.reshape(batch, heads, seq, -1)
        return t.view(batch, seq, heads, -1).transpose(1, 2)

    q, k, v = split(x @ wq.T), split(x @ wk.T), split(x @ wv.T)
    scores = q @ k.transpose(-1, -2) / (math.sqrt(q.shape[-1]) if scaled else 1.0)
    out = (scores.softmax(dim=over) @ v).transpose(1, 2).reshape(batch, seq, -1)
    return out @ wo.T


def _attention_on_rank(rank: int, world_size: int, fn: Callable, seed: int, batch: int, seq: int) -> tuple:
    mine = private_generator()
    n, scale = ATTENTION_DIM // world_size, 1 / math.sqrt(ATTENTION_DIM)
    wq, wk, wv = (torch.randn(n, ATTENTION_DIM, generator=mine) * scale for _ in range(3))
    wo = torch.randn(ATTENTION_DIM, n, generator=mine) * scale
    x = torch.randn(batch, seq, ATTENTION_DIM, generator=_shared(seed, 5))
    with torch.no_grad(), CommLog() as log:
        out = fn(x, wq.clone(), wk.clone(), wv.clone(), wo.clone(), HEADS // world_size)
    return out, log.summary(), (wq, wk, wv, wo)


def _not_the_weights(what: str, summary: dict, elements: int) -> None:
    """An all_reduce the size of whole weight matrices (and not of the output) carried weights."""
    __tracebackhide__ = True
    square = ATTENTION_DIM * ATTENTION_DIM
    for op, n in summary["contributed"]:
        if op == "all_reduce" and n != elements and n % square == 0:
            fail(
                f"{what}: an all_reduce carried {n} elements from this rank, the size of {n // square} whole "
                f"{ATTENTION_DIM} x {ATTENTION_DIM} weights; expected {elements}, its heads' partial sum of "
                "the output. Rebuilding the whole weights on every rank is not tensor parallelism: each rank "
                "computes its own heads, and only their partial sums of the output are added up."
            )


def check_tensor_parallel_attention(
    fn: Callable, world_sizes: Sequence[int] = (2,), batch: int = 2, seq: int = 5
) -> None:
    """Check ``fn(x, wq, wk, wv, wo, heads)``: this rank's ``heads`` heads (its rows of wq, wk, wv,
    its columns of wo); every rank returns the whole attention output, with one all_reduce of it."""
    __tracebackhide__ = True
    for world_size in world_sizes:
        seed = fresh_seed()
        what = f"attention with {HEADS} heads on {counted(world_size, 'rank')}"
        per_rank = run_ranks(_attention_on_rank, world_size, fn, seed, batch, seq, what="the attention")
        weights = [torch.cat([shards[i] for _, _, shards in per_rank]) for i in range(3)]
        weights.append(torch.cat([shards[3] for _, _, shards in per_rank], dim=1))
        x = torch.randn(batch, seq, ATTENTION_DIM, generator=_shared(seed, 5))
        expected = reference_attention(x, *weights, HEADS)
        hints = {
            "leave the scores undivided by the square root of the head dimension": reference_attention(
                x, *weights, HEADS, scaled=False
            ),
            "softmax over the queries rather than the keys": reference_attention(x, *weights, HEADS, over=-2),
            "split the heads with a reshape to (batch, heads, seq, head_dim), which mixes tokens and heads "
            "(view as (batch, seq, heads, head_dim), then transpose)": sum(
                reference_attention(x, *shards, HEADS // world_size, mixed=True) for _, _, shards in per_rank
            ),
        }
        for rank, (out, summary, _) in enumerate(per_rank):
            _expect(f"{what}: rank {rank}'s output", out, expected, hints)
            if world_size > 1:
                _counts(f"{what}: rank {rank}", summary, {"all_reduce": 1})
                _not_the_weights(f"{what}: rank {rank}", summary, batch * seq * ATTENTION_DIM)
                _carried(
                    f"{what}: rank {rank}",
                    summary,
                    "all_reduce",
                    batch * seq * ATTENTION_DIM,
                    "its heads' partial sum of the output",
                )
