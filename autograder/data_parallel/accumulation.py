"""Notebook 04's check of gradient accumulation whose last micro-batch's all_reduces overlap its
backward, as DDP's ``no_sync()`` has it: called twice on one model, each micro-batch forwarded
and differentiated on its own, no communication before the last one's backward."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ..checks import counted, fail, fresh_seed, run_ranks
from ..comm import recording_waits
from .model import _compare, _params_like, make_batch, make_mlp, mse
from .overlap import Recorder, expect_launches, expect_waits, started

MICRO_ROWS = 3


def _micro_batch(seed: int, call: int, rank: int, i: int) -> tuple[torch.Tensor, torch.Tensor]:
    return make_batch(MICRO_ROWS, seed=seed + 1 + 1000 * call + 100 * rank + i)


def _accumulate_on_rank(
    rank: int, world_size: int, step: Callable, k: int, lr: float, seed: int, calls: int
) -> list:
    model = make_mlp(seed=seed)
    events: list = []
    Recorder(model, events)  # before the step's own hooks, which it registers when called
    out = []
    for call in range(calls):
        micro = [_micro_batch(seed, call, rank, i) for i in range(k)]
        events.clear()
        with recording_waits(events, deliver_on_wait=True) as waited:
            step(model, micro, lr)
        out.append(([p.detach().clone() for p in model.parameters()], list(events), list(waited)))
    return out


def _reference(
    batches: list[list[tuple]], lr: float, seed: int, scale: float = 1.0, keep: bool = False
) -> list[list[torch.Tensor]]:
    """The parameters after each step of one process on every rank's micro-batches together;
    ``scale`` multiplies the loss, and ``keep`` never clears the gradients (typical mistakes)."""
    model, after = make_mlp(seed=seed), []
    for step in batches:
        if not keep:
            model.zero_grad()
        data, targets = torch.cat([x for x, _ in step]), torch.cat([y for _, y in step])
        (mse(model(data), targets) * scale).backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= lr * p.grad
        after.append([p.detach().clone() for p in model.parameters()])
    return after


def _expect_one_backward_each(what: str, events: list, k: int) -> None:
    __tracebackhide__ = True
    forwards = [e[1] for e in events if e[0] == "forward"]
    if forwards != [MICRO_ROWS] * k:
        fail(
            f"{what}: the model ran forward on batches of {forwards} rows; expected {k} forwards of "
            f"{MICRO_ROWS} rows, one per micro-batch. (A batch too large for memory is the reason for "
            "micro-batches: they are not concatenated.)"
        )
    order = "".join("F" if e[0] == "forward" else "B" for e in events if e[0] in ("forward", "end"))
    if order != "FB" * k:
        fail(
            f"{what}: the forwards (F) and backwards (B) of the micro-batches came as {order}; expected "
            f"{'FB' * k}, each micro-batch's backward before the next forward. One backward of the "
            "micro-batches' summed losses keeps the activations of all of them alive at once: the "
            "memory that micro-batches exist to save."
        )


def check_accumulation(
    step: Callable, world_sizes: Sequence[int] = (2,), k: int = 3, lr: float = 0.1, calls: int = 2
) -> None:
    """Check ``step(model, micro_batches, lr)``, called ``calls`` times on one model: each call one
    SGD step over this rank's ``k`` micro-batches and every other rank's, as one process would take
    it on all of them; each micro-batch forwarded and differentiated on its own; no communication
    until the last micro-batch's backward, whose all_reduces start from hooks as each gradient is
    final and are waited on after it; no hook left behind to act in the next call."""
    __tracebackhide__ = True
    seed = fresh_seed()
    params = list(make_mlp().parameters())
    per_parameter = [[i] for i in range(len(params))]
    for world_size in world_sizes:
        what = f"{counted(world_size, 'rank')}, {k} micro-batches each"
        per_rank = run_ranks(
            _accumulate_on_rank, world_size, step, k, lr, seed, calls, what="the accumulating step"
        )
        batches = [
            [_micro_batch(seed, call, r, i) for r in range(world_size) for i in range(k)]
            for call in range(calls)
        ]
        reference = _reference(batches, lr, seed)
        not_scaled = _reference(batches, lr, seed, scale=k)
        not_cleared = _reference(batches, lr, seed, keep=True)
        for rank, results in enumerate(per_rank):
            for call, (after, events, waited) in enumerate(results):
                where = f"step on {what}, call {call + 1} of {calls}, rank {rank}"
                _expect_one_backward_each(where, events, k)
                last = max(n for n, e in enumerate(events) if e[0] == "forward")
                early = started(events[:last])
                if early:
                    fail(
                        f"{where}: {counted(len(early), 'all_reduce')} started before the last "
                        "micro-batch's forward. The other micro-batches only add up their gradients in "
                        ".grad; communicate once, during the last one's backward."
                        + (
                            " Call 1 started none there, so something the earlier call left behind "
                            "communicated: hooks it registered and never removed (or switched off)."
                            if call
                            else ""
                        )
                    )
                expect_launches(where, events[last:], per_parameter, params, ordered=False, hooks_first=False)
                expect_waits(where, events[last:], waited)
                _params_like(where, after, reference[call])
                mistakes = {
                    "add up the micro-batches' gradients without dividing by their number": not_scaled[call]
                }
                if call:
                    mistakes["leave the previous step's gradients in .grad"] = not_cleared[call]
                _compare(where, after, reference[call], mistakes)
