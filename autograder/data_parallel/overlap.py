"""Notebook 04's checks of overlapping the gradients' all_reduces with backward, and of
gradient accumulation."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from ..checks import MATMUL_OPS, Timeline, allclose, counted, fail, fresh_seed, run_ranks
from ..comm import recording_waits
from .model import _compare, _params_like, make_batch, make_mlp, mse, train_alone

# -- exercises: overlapping communication with backward --------------------------------------------


def overlap_model(tie: bool = False, freeze: bool = False, seed: int = 0) -> nn.Sequential:
    """The model of the overlap checks: the MLP, with its first and last weights tied, or its
    first bias frozen, if asked."""
    model = make_mlp(seed=seed)
    if tie:
        model[-1].weight = model[0].weight
    if freeze:
        model[0].bias.requires_grad_(False)
    return model


def _overlap_batch(seed: int, step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    return make_batch(6, seed=seed + 1 + 100 * step + rank)


def _overlap_on_rank(
    rank: int, world_size: int, make_sync: Callable, model_kind: dict, steps: int, seed: int
) -> list:
    model = overlap_model(**model_kind, seed=seed)
    sync = make_sync(model)
    out = []
    for step in range(steps):
        model.zero_grad(set_to_none=True)
        x, y = _overlap_batch(seed, step, rank)
        timeline = Timeline()
        with recording_waits() as waited, timeline:
            mse(model(x), y).backward()
            timeline.events.append(("mark", "backward returned"))
            sync.finish()
        grads = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
        out.append((grads, timeline.events, waited))
    return out


def _average_grads(model_kind: dict, world_size: int, step: int, seed: int) -> list:
    """Each parameter's gradient averaged over the ranks' data, computed in one process."""
    total: list = []
    for rank in range(world_size):
        model = overlap_model(**model_kind, seed=seed)
        x, y = _overlap_batch(seed, step, rank)
        mse(model(x), y).backward()
        grads = [p.grad for p in model.parameters()]
        total = (
            grads if not total else [None if a is None else a + b for a, b in zip(total, grads, strict=True)]
        )
    return [None if g is None else g / world_size for g in total]


def check_overlap(
    make_sync: Callable,
    world_sizes: Sequence[int] = (2,),
    buckets: Callable[[nn.Module], list[list[int]]] | None = None,
    model_kinds: Sequence[dict] = ({},),
    steps: int = 2,
) -> None:
    """Check a gradient synchroniser ``sync = make_sync(model)``, whose hooks start all_reduces
    during ``loss.backward()`` and whose ``sync.finish()`` waits for them: the gradients are
    averaged over the ranks, the all_reduces started while backward still had work to do, every
    handle was waited on, and, given ``buckets`` (the parameters' indices, by bucket), there was
    one all_reduce per bucket of the bucket's size; else one per parameter."""
    __tracebackhide__ = True
    seed = fresh_seed()
    for world_size in world_sizes:
        for kind in model_kinds:
            what = f"training step(s) on {counted(world_size, 'rank')}" + (
                f" of a model with {kind}" if kind else ""
            )
            per_rank = run_ranks(
                _overlap_on_rank, world_size, make_sync, dict(kind), steps, seed, what="the synchroniser"
            )
            params = list(overlap_model(**kind).parameters())
            expected = (
                [sum(params[i].numel() for i in bucket) for bucket in buckets(overlap_model(**kind))]
                if buckets
                else [p.numel() for p in params if p.requires_grad]
            )
            for step in range(steps):
                average = _average_grads(kind, world_size, step, seed)
                for rank in range(world_size):
                    grads, events, waited = per_rank[rank][step]
                    where = f"{what}, step {step + 1}, rank {rank}"
                    _check_overlap_step(
                        where, grads, events, waited, average, expected, bool(buckets), world_size
                    )


def _check_overlap_step(
    what: str,
    grads: list,
    events: list,
    waited: list,
    average: list,
    expected: list[int],
    bucketed: bool,
    world_size: int,
) -> None:
    __tracebackhide__ = True
    mark = next(i for i, e in enumerate(events) if e[0] == "mark")
    reduces = [
        (i, sum(n for n in e[3] if n)) for i, e in enumerate(events) if e[0] == "op" and e[2] == "allreduce_"
    ]
    late = [n for i, n in reduces if i > mark]
    if late:
        fail(
            f"{what}: {len(late)} of the {len(reduces)} all_reduces were issued after backward returned. "
            "Start each as soon as its gradients are ready, from a hook, so that it overlaps with the "
            "rest of backward."
        )
    # Issued before backward returned is not enough: issued all at once from the last hook, they
    # overlap with nothing. With more than one, the first must start before backward's last
    # matrix multiply (the first layer's weight gradient).
    matmuls = [i for i, e in enumerate(events[:mark]) if e[0] == "op" and e[2] in MATMUL_OPS]
    if len(expected) > 1 and reduces and matmuls and reduces[0][0] > matmuls[-1]:
        fail(
            f"{what}: the first all_reduce started only after backward's last matrix multiply, so none "
            "of them overlapped with backward's work. Start each as soon as its own gradients are final."
        )
    sizes = sorted(n for _, n in reduces)
    if sizes != sorted(expected):
        unit = "bucket (its gradients in one flat buffer)" if bucketed else "parameter"
        fail(f"{what}: the all_reduces moved {sizes} elements; expected one per {unit}: {sorted(expected)}.")
    if not all(waited):
        fail(
            f"{what}: finish() returned without waiting on {waited.count(False)} of the {len(waited)} "
            "all_reduce handles. Wait on every one before the optimizer uses the gradients: until then they "
            "may still change."
        )
    for i, (g, a) in enumerate(zip(grads, average, strict=True)):
        if (g is None) != (a is None):
            fail(f"{what}: parameter {i}'s gradient is {g!r:.60}; expected {'none' if a is None else 'one'}.")
        if g is not None and not allclose(g, a, rtol=1e-4, atol=1e-6):
            summed = allclose(g, a * world_size, rtol=1e-4, atol=1e-6)
            hint = " It is the sum over the ranks: divide by the world size." if summed else ""
            fail(f"{what}: parameter {i}'s gradient is not the average over the ranks after finish().{hint}")


# -- exercise: gradient accumulation ---------------------------------------------------------------

MICRO_ROWS = 3


def _micro_batch(seed: int, rank: int, i: int) -> tuple[torch.Tensor, torch.Tensor]:
    return make_batch(MICRO_ROWS, seed=seed + 1 + 100 * rank + i)


def _accumulate_on_rank(rank: int, world_size: int, step: Callable, k: int, lr: float, seed: int) -> tuple:
    model = make_mlp(seed=seed)
    micro = [_micro_batch(seed, rank, i) for i in range(k)]
    # A Timeline, not a CommLog: torch 2.13's CommDebugMode breaks a module's forward hooks.
    timeline = Timeline()
    model.register_forward_pre_hook(
        lambda module, inputs: timeline.events.append(("forward", inputs[0].shape[0]))
    )
    with timeline:
        step(model, micro, lr)
    forwards = [e[1] for e in timeline.events if e[0] == "forward"]
    last_forward = max((i for i, e in enumerate(timeline.events) if e[0] == "forward"), default=-1)
    reduces = [
        (i, sum(n for n in e[3] if n))
        for i, e in enumerate(timeline.events)
        if e[0] == "op" and e[2] == "allreduce_"
    ]
    early = sum(1 for i, _ in reduces if i < last_forward)
    reduced = sum(n for _, n in reduces)
    return [p.detach().clone() for p in model.parameters()], forwards, early, reduced


def check_accumulation(
    step: Callable, world_sizes: Sequence[int] = (2,), k: int = 3, lr: float = 0.1
) -> None:
    """Check ``step(model, micro_batches, lr)``: one SGD step over this rank's ``k`` micro-batches
    and every other rank's, as one process would take it on all of them, each micro-batch
    forwarded on its own, and the gradients communicated once, after the last micro-batch."""
    __tracebackhide__ = True
    total = sum(p.numel() for p in make_mlp().parameters())
    seed = fresh_seed()
    for world_size in world_sizes:
        what = f"step on {counted(world_size, 'rank')} with {k} micro-batches each"
        per_rank = run_ranks(_accumulate_on_rank, world_size, step, k, lr, seed, what="the accumulating step")
        batches = [_micro_batch(seed, r, i) for r in range(world_size) for i in range(k)]
        data, targets = torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches])
        reference = train_alone(make_mlp(seed=seed), data, targets, 1, lr)
        for rank, (params, forwards, early, reduced) in enumerate(per_rank):
            if forwards != [MICRO_ROWS] * k:
                fail(
                    f"{what}: rank {rank}'s model ran forward on batches of {forwards} rows; expected {k} "
                    f"forwards of {MICRO_ROWS} rows, one per micro-batch. (A batch too large for memory is "
                    "the reason for micro-batches: they are not concatenated.)"
                )
            if early:
                fail(
                    f"{what}: rank {rank} issued {counted(early, 'all_reduce')} before the forward of "
                    "its last micro-batch. Communicate the gradients once, after the last micro-batch: "
                    "the others only accumulate."
                )
            # The gradients once; a logged loss or two may be all_reduced too.
            if not total <= reduced < 2 * total:
                fail(
                    f"{what}: rank {rank}'s all_reduces moved {reduced} elements in all; the model has "
                    f"{total} parameters. Communicate the gradients once, after the last micro-batch."
                )
            _params_like(f"{what}: rank {rank}", params, reference)
            not_scaled = train_alone(make_mlp(seed=seed), data, targets, 1, lr * k)
            _compare(
                f"{what}: rank {rank}",
                params,
                reference,
                {"add up the micro-batches' gradients without dividing by their number": not_scaled},
            )
