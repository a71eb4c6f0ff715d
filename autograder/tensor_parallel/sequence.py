"""Notebook 05's check of the cross-entropy over a vocabulary split across the ranks."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from ..checks import counted, fail, fresh_seed, private_generator, run_ranks
from ..comm import CommLog
from .shards import _expect, _shared, _type

# -- exercise: cross-entropy over a vocabulary split across ranks --------------------------------

VOCAB, ROWS = 24, 8
_NUMBERS_PER_ROW = 3  # a generous bound on what a rank needs to share per row: max, sum, target
_OUTLIER = 200.0  # far enough above the rest that exp() of anything but the largest logit overflows


def _targets(seed: int, world_size: int) -> torch.Tensor:
    """The rows' targets: every rank's first and last entry of the vocabulary, where a shard
    boundary off by one goes wrong, then random ones (the same on every rank and here)."""
    width = VOCAB // world_size
    edges = [i for rank in range(world_size) for i in (rank * width, (rank + 1) * width - 1)]
    targets = torch.randint(0, VOCAB, (ROWS,), generator=_shared(seed, 8))
    edges = torch.tensor(sorted(set(edges)))[:ROWS]
    targets[: len(edges)] = edges
    return targets


def _outliers(seed: int) -> torch.Tensor:
    """For each row, the index of a logit _OUTLIER above the rest, or -1: three rows have one,
    one of them at its target. A constant shift (the mean, say) leaves exp(~200) = inf there."""
    where = torch.full((ROWS,), -1)
    where[1:3] = torch.randint(0, VOCAB, (2,), generator=_shared(seed, 9))
    return where


def _cross_entropy_on_rank(rank: int, world_size: int, fn: Callable, seed: int, scale: float) -> tuple:
    width = VOCAB // world_size
    logits = torch.randn(ROWS, width, generator=private_generator()) * 3 + scale
    targets = _targets(seed, world_size)
    outliers = _outliers(seed)
    outliers[ROWS - 1] = targets[ROWS - 1]
    for row, index in enumerate(outliers.tolist()):
        if rank * width <= index < (rank + 1) * width:
            logits[row, index - rank * width] += _OUTLIER
    with torch.no_grad(), CommLog() as log:
        loss = fn(logits.clone(), targets.clone(), rank * width)
    return loss, log.summary(), logits


def _boundary_mistakes(logits: torch.Tensor, targets: torch.Tensor, world_size: int) -> dict:
    """The losses that a shard boundary off by one gives when a target is a rank's first entry (as
    computed with the largest logit subtracted, where the target's logit was shifted too)."""
    width = VOCAB // world_size
    logits = logits.double()
    total = torch.logsumexp(logits, dim=1)
    right = logits.gather(1, targets[:, None])[:, 0]
    first = (targets % width == 0) & (targets > 0)
    before = logits.gather(1, (targets - 1).clamp(min=0)[:, None])[:, 0]
    largest = logits.max(dim=1).values
    # `local <= width`: the rank before also claims the target, adding its last logit (shifted)
    claimed_twice = torch.where(first, right + before - largest, right)
    # `local > 0`: no rank claims a target at the start of its shard
    claimed_by_none = torch.where(targets % width == 0, largest, right)
    return {
        "let a rank also claim the first entry of the next rank's shard (a boundary off by one)": (
            total - claimed_twice
        ).mean(),
        "let no rank claim the first entry of its own shard (a boundary off by one)": (
            total - claimed_by_none
        ).mean(),
    }


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
            targets = _targets(seed, world_size)
            expected = F.cross_entropy(logits.double(), targets)
            for rank, (loss, summary, _) in enumerate(per_rank):
                if _type(loss) is torch.Tensor and loss.dim() == 0 and not torch.isfinite(loss):
                    fail(f"{what}: rank {rank}'s loss is {loss.item()}. {_not_finite(loss.item())}")
                _expect(
                    f"{what}: rank {rank}'s loss",
                    loss,
                    expected,
                    _boundary_mistakes(logits, targets, world_size),
                )
                for name, n in summary["contributed"]:
                    if n > _NUMBERS_PER_ROW * ROWS:
                        fail(
                            f"{what}: rank {rank} put {n} elements into one {name}; its shard of the logits "
                            f"has {ROWS * VOCAB // world_size}. The point is never to hold the whole "
                            f"vocabulary's logits on one rank: exchange a few numbers per row ({ROWS} rows)."
                        )


def _not_finite(loss: float) -> str:
    """What makes the loss infinite: exponentials that overflow (+inf), or a row whose every
    exponential underflows to 0, whose log is -inf (NaN: either, met by the other)."""
    overflow = (
        f"exp() overflows float32 above 88.7, and in some rows one logit is {_OUTLIER:g} above the rest "
        "of its row: what you subtract before exponentiating did not bring that logit down far enough."
    )
    underflow = (
        "In some row every exponential came out 0 (exp() underflows float32 below about -103), and log(0) "
        "is -inf: what you subtract before exponentiating is far above that row's largest logit. Is it "
        "each row's own maximum, over every rank's shard?"
    )
    if loss == float("inf"):
        return overflow
    if loss == float("-inf"):
        return underflow
    return f"Either {overflow[0].lower() + overflow[1:]} Or: {underflow}"
