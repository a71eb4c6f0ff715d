"""Exercise 1: predicting what each collective leaves on every rank."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from ..checks import _short, expect_tensor, fail
from .references import ROOTED, SPLITTING, collective_inputs, real_outputs


def check_predictions(
    predictions: dict[str, Callable[..., list[Any]]],
    world_sizes: Sequence[int] = (4,),
    seeds: Sequence[int | None] = (None,),
    dtypes: Sequence[torch.dtype] = (torch.int64,),
    per_rank: Sequence[int | None] = (None,),
) -> None:
    """Check each ``predictions[name](inputs[, root])`` against torch's collective ``name``,
    on every rank, from every root, for each world size, seed and dtype, and for the collectives
    that cut a tensor into chunks, each number of elements ``per_rank`` (one launch per world
    size)."""
    __tracebackhide__ = True
    for world_size in world_sizes:
        cases = [
            (name, collective_inputs(name, world_size, seed, dtype, per), root)
            for name in predictions
            for seed in seeds
            for dtype in dtypes
            for per in (per_rank if name in SPLITTING else (None,))
            for root in (range(world_size) if name in ROOTED else [0])
        ]
        for (name, inputs, root), real in zip(cases, real_outputs(cases, world_size), strict=True):
            with _no_launching(f"after_{name}"):
                _compare_prediction(name, predictions[name], inputs, root, real)


@contextlib.contextmanager
def _no_launching(name: str) -> Iterator[None]:
    """Predictions are tensor code: running the real collective inside one fails the check."""
    from launcher import call

    def refuse(*args: Any, **kwargs: Any) -> None:
        fail(f"{name} launched ranks; predict with tensor code alone, without torch.distributed.")

    real, call.Supervisor = call.Supervisor, refuse
    try:
        yield
    finally:
        call.Supervisor = real


def _compare_prediction(
    name: str, predict: Callable, inputs: list[torch.Tensor], root: int, real: list
) -> None:
    __tracebackhide__ = True
    world_size = len(inputs)
    call = f"after_{name}({_short(inputs)}{f', {root}' if name in ROOTED else ''}) ({inputs[0].dtype})"
    predicted = predict(inputs, root) if name in ROOTED else predict(inputs)
    if not isinstance(predicted, (list, tuple)) or len(predicted) != world_size:
        fail(f"{call} should return a list with one entry per rank ({world_size}); got {_short(predicted)}.")
    for rank, (mine, theirs) in enumerate(zip(predicted, real, strict=True)):
        where = f"{call}, rank {rank}"
        if theirs is None:
            if mine is not None:
                fail(f"{where}: this rank receives nothing from {name}, so predict None; got {_short(mine)}.")
            continue
        expect_tensor(mine, theirs, where, mistakes=_prediction_mistakes(name, inputs, rank, root))


def _prediction_mistakes(
    name: str, inputs: list[torch.Tensor], rank: int, root: int
) -> dict[str, torch.Tensor]:
    mistakes = _usual_mistakes(name, inputs, rank, root)
    if name in ("scatter", "reduce_scatter") and len(inputs) != 4:  # the lecture's 4 ranks, kept
        cut = (inputs[root] if name == "scatter" else torch.stack(inputs).sum(0)).chunk(4)
        if rank < len(cut):
            mistakes["cut into 4 chunks whatever the number of ranks (there are len(inputs))"] = cut[rank]
    return mistakes


def _usual_mistakes(name: str, inputs: list[torch.Tensor], rank: int, root: int) -> dict[str, torch.Tensor]:
    n = len(inputs)
    total = torch.stack(inputs).sum(0)
    own = inputs[rank]
    if name == "reduce_scatter":
        return {
            "give every rank the whole sum (that is all_reduce)": total,
            "give rank r chunk r of its own input, without summing": own.chunk(n)[rank],
        }
    if name == "all_to_all":
        return {
            "leave each rank's input where it is": own,
            "give rank r chunk r of the sum (that is reduce_scatter)": total.chunk(n)[rank],
        }
    if name == "scatter":
        return {"split each rank's own input instead of the source's": own.chunk(n)[rank]}
    if name in ("gather", "all_gather"):
        return {"sum the inputs instead of putting them side by side": total}
    if name in ("all_reduce", "reduce"):
        return {"put the inputs side by side instead of summing": torch.cat(inputs)}
    return {}
