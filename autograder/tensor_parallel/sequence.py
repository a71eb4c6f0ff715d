"""Notebook 05's checks of what is split along the tokens or the vocabulary: sequence
parallelism, and the cross-entropy over a vocabulary split across the ranks."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from ..checks import counted, fail, fresh_seed, private_generator, run_ranks
from ..comm import CommLog
from .shards import DIM, _carried, _column_shard, _counts, _expect, _row_shard, _rows, _shared, _type

# -- exercise: sequence parallelism --------------------------------------------------------------

SEQUENCE = 12


def _sequence_on_rank(rank: int, world_size: int, fn: Callable) -> tuple:
    mine = private_generator()
    x = torch.randn(SEQUENCE // world_size, DIM, generator=mine)
    w1, _ = _column_shard(world_size, mine)
    w2 = _row_shard(world_size, mine)
    with torch.no_grad(), CommLog() as log:
        out = fn(x.clone(), w1.clone(), w2.clone())
    return out, log.summary(), (x, w1, w2)


def check_sequence_parallel(fn: Callable, world_sizes: Sequence[int] = (2,)) -> None:
    """Check ``fn(x_tokens, w1, w2)``: the MLP ``gelu(x @ w1.T) @ w2.T`` (no biases) with its input
    and output split by tokens and its weights split as Megatron's; one all_gather of this rank's
    tokens and one reduce_scatter of its part of every token's output, no all_reduce."""
    __tracebackhide__ = True
    for world_size in world_sizes:
        what = f"the sequence-parallel MLP on {counted(world_size, 'rank')}, {SEQUENCE} tokens"
        per_rank = run_ranks(_sequence_on_rank, world_size, fn, what="the sequence-parallel MLP")
        x = torch.cat([shards[0] for _, _, shards in per_rank])
        w1 = torch.cat([shards[1] for _, _, shards in per_rank])
        w2 = torch.cat([shards[2] for _, _, shards in per_rank], dim=1)
        full = F.gelu(x @ w1.T) @ w2.T
        for rank, (out, summary, _) in enumerate(per_rank):
            _expect(
                f"{what}: rank {rank}'s output (its tokens)", out, full[_rows(SEQUENCE, rank, world_size)]
            )
            if world_size == 1:
                continue
            if summary["collectives"].get("all_reduce"):
                fail(
                    f"{what}: rank {rank} issued an all_reduce. An all_reduce leaves every rank the whole "
                    "output, of which it keeps a slice; a reduce_scatter sends each rank only its tokens."
                )
            _counts(f"{what}: rank {rank}", summary, {"all_gather": 1, "reduce_scatter": 1})
            tokens = SEQUENCE // world_size
            _carried(f"{what}: rank {rank}", summary, "all_gather", tokens * DIM, "its tokens of the input")
            _carried(
                f"{what}: rank {rank}",
                summary,
                "reduce_scatter",
                SEQUENCE * DIM,
                "its part of every token's output",
            )


# -- exercise: cross-entropy over a vocabulary split across ranks --------------------------------

VOCAB, ROWS = 24, 6
_NUMBERS_PER_ROW = 3  # a generous bound on what a rank needs to share per row: max, sum, target


def _cross_entropy_on_rank(rank: int, world_size: int, fn: Callable, seed: int, scale: float) -> tuple:
    logits = torch.randn(ROWS, VOCAB // world_size, generator=private_generator()) * 3 + scale
    targets = torch.randint(0, VOCAB, (ROWS,), generator=_shared(seed, 8))
    with torch.no_grad(), CommLog() as log:
        loss = fn(logits.clone(), targets.clone(), rank * (VOCAB // world_size))
    return loss, log.summary(), logits


def check_vocab_parallel_cross_entropy(
    fn: Callable, world_sizes: Sequence[int] = (2,), scales: Sequence[float] = (0.0,)
) -> None:
    """Check ``fn(logits_shard, targets, vocab_start)``: the mean cross-entropy over the rows, equal
    on every rank to ``F.cross_entropy`` of the whole logits, with no collective carrying more than
    a few numbers per row from any rank."""
    __tracebackhide__ = True
    for scale in scales:
        for world_size in world_sizes:
            seed = fresh_seed()
            what = f"the cross-entropy on {counted(world_size, 'rank')}, logits around {scale:g}"
            per_rank = run_ranks(
                _cross_entropy_on_rank, world_size, fn, seed, scale, what="the cross-entropy"
            )
            logits = torch.cat([shard for _, _, shard in per_rank], dim=1)
            targets = torch.randint(0, VOCAB, (ROWS,), generator=_shared(seed, 8))
            expected = F.cross_entropy(logits.double(), targets)
            for rank, (loss, summary, _) in enumerate(per_rank):
                if _type(loss) is torch.Tensor and loss.dim() == 0 and not torch.isfinite(loss):
                    fail(
                        f"{what}: rank {rank}'s loss is {loss.item()}. exp() of logits near {scale:g} "
                        "overflows: subtract the largest logit (over the whole vocabulary) before "
                        "exponentiating."
                    )
                _expect(f"{what}: rank {rank}'s loss", loss, expected)
                for name, n in summary["contributed"]:
                    if n > _NUMBERS_PER_ROW * ROWS:
                        fail(
                            f"{what}: rank {rank} put {n} elements into one {name}; its shard of the logits "
                            f"has {ROWS * VOCAB // world_size}. The point is never to hold the whole "
                            f"vocabulary's logits on one rank: exchange a few numbers per row ({ROWS} rows)."
                        )
