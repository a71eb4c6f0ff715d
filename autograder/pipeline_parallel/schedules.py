"""Checks for notebook 06 (pipeline parallelism).

A stage of the pipeline is a `Stage` (stage.py): a few layers behind a marker that
autograd itself runs, so that the checks keep a record of what really ran on it: each
micro-batch's forward, and the moment its backward has gone through every layer of the stage,
ordered among the stage's messages. From it the checks read the order a stage ran (not the order
it was asked to run); weak references to what autograd saved in each forward count how many
micro-batches' activations it really held at once. Each rank draws its own stage's weights,
rank 0 the inputs and the last rank the targets, at random inside the rank, where no other
process can reproduce them; the whole model is assembled here, in the checking process, from what
the ranks return, and is the reference.

What the ranks send each other is recorded with `CommLog`: how many messages, of how many values.
The check of the lecture's forward pipeline is in `forward`; those of the split of the layers, of
the bubble's simulation and of activation checkpointing are in `costs`, those of interleaved
stages on ranks in `interleaved`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from ..checks import CheckFailed, counted, expect_floats, fail, private_generator, run_ranks
from ..comm import CommLog
from .stage import (
    DIM,
    LAYERS_PER_STAGE,
    gpipe_order,
    peak_alive,
    stages_from,
    traced_stage,
    written_order,
)

_type = type


def _rows_run(where: str, rows_run: list, rows: list) -> None:
    __tracebackhide__ = True
    if rows_run != rows:
        fail(
            f"{where} ran its layers on inputs of {rows_run} rows; the micro-batches have {rows} rows: "
            "run each micro-batch through the stage once, as it comes."
        )


def _steps_and_messages(where: str, journal: list, messages: list, rank: int, world_size: int) -> None:
    """Each step against the messages around it, in the order the rank posted them: micro-batch
    i's activation is received before its forward and sent on after it; its gradient is received
    before its backward and sent back after it."""
    __tracebackhide__ = True
    step = {(kind, i): seq for kind, i, seq in journal}

    def posted(op: str, peer: int) -> list[int]:
        return [seq for o, p, _, seq in messages if o == op and p in (peer, None)]

    rules = []  # (step, micro-batch, a message's number, whether the step comes after it, why)
    if rank > 0:
        rules += [
            ("F", i, n, True, "after receiving its activation")
            for i, n in enumerate(posted("recv", rank - 1))
        ]
        rules += [
            ("B", i, n, False, "before sending its gradient back")
            for i, n in enumerate(posted("send", rank - 1))
        ]
    if rank < world_size - 1:
        rules += [
            ("F", i, n, False, "before sending its activation on")
            for i, n in enumerate(posted("send", rank + 1))
        ]
        rules += [
            ("B", i, n, True, "after receiving its gradient") for i, n in enumerate(posted("recv", rank + 1))
        ]
    for kind, i, seq, after, when in rules:
        mine = step.get((kind, i))
        if mine is not None and (mine < seq if after else mine > seq):
            fail(
                f"{where}: the stage's record of its steps and its messages disagree: "
                f"{'forward' if kind == 'F' else 'backward'} {i} must run {when}, and did not."
            )
    _sent_before_the_next_step(where, journal, posted("send", rank + 1), posted("send", rank - 1))


_STEP = {"F": "forward", "B": "backward"}


def _sent_before_the_next_step(
    where: str, journal: list, activations: list[int], gradients: list[int]
) -> None:
    """What a step sends is posted before the stage's next step begins: a stage that computes on
    while its result waits unsent keeps its neighbour idle."""
    __tracebackhide__ = True
    sends = {("F", i): seq for i, seq in enumerate(activations)}
    sends |= {("B", i): seq for i, seq in enumerate(gradients)}
    steps = sorted(journal, key=lambda event: event[2])
    for (kind, i, _), (next_kind, j, begun) in itertools.pairwise(steps):
        posted = sends.get((kind, i))
        if posted is not None and posted > begun:
            what = "activation" if kind == "F" else "gradient"
            fail(
                f"{where} began {_STEP[next_kind]} {j} before it sent micro-batch {i}'s {what} on: the "
                f"neighbouring stage waits idle for it all that time. Post each send as soon as the step "
                "that computed it has finished."
            )


def _held(where: str, got: dict, most: int, one_f_one_b: bool) -> None:
    """The micro-batches whose activations autograd still kept, counted from live tensors."""
    __tracebackhide__ = True
    order = got["order"]
    if one_f_one_b and got["held"] > most and got["held"] == peak_alive(order):
        ahead = next((n for n, (kind, _) in enumerate(order) if kind == "B"), len(order))
        why = (
            "; that is GPipe's order, which holds every micro-batch's activations"
            if ahead == len(order) // 2
            else ", more than it needs"
        )
        fail(
            f"{where} held the activations of {got['held']} micro-batches at once: its order runs "
            f"{counted(ahead, 'forward')} before the first backward{why}. 1F1B holds at most {most} on "
            "this stage."
        )
    if got["held"] > most:
        rule = (
            f"1F1B holds at most {most} on this stage" if one_f_one_b else f"its order needs at most {most}"
        )
        fail(
            f"{where} held the activations of {got['held']} micro-batches at once (the tensors autograd "
            f"saved for their backwards were still alive); {rule}. Is each micro-batch's graph freed once "
            "its backward has run?"
        )
    if got["kept_after"]:
        fail(
            f"{where} still held the activations of {_microbatches(got['kept_after'])} after the "
            "step had returned: a graph kept after its backward is memory a pipeline cannot spare."
        )


def _no_collectives(where: str, summary: dict) -> None:
    __tracebackhide__ = True
    if summary["calls"]:
        fail(
            f"{where} issued {summary['calls'][0][0]}: pipeline stages pass activations and gradients to "
            "their neighbours with sends and receives, and nothing else."
        )


def _expect(
    what: str, actual: Any, expected: torch.Tensor, hints: dict[str, torch.Tensor] | None = None
) -> None:
    __tracebackhide__ = True
    expect_floats(what, actual, expected, "the single-process model's", mistakes=hints, atol=1e-6)


def _microbatches(n: int) -> str:
    return "1 micro-batch" if n == 1 else f"{n} micro-batches"


def _show(order: Sequence) -> str:
    return " ".join(f"{kind}{i}" for kind, i in order) if order else "nothing"


def _messages(messages: Sequence[tuple[int | None, int]]) -> str:
    if not messages:
        return "no messages"
    return ", ".join(f"{n} values (rank {peer})" for peer, n in messages)


# -- exercise: a step of the pipeline, forward and backward, in any order ------------------------


def _schedule_on_rank(
    rank: int, world_size: int, run: Callable, orders: Any, num_microbatches: int, rows: int
) -> dict:
    mine = private_generator()
    stage, journal, rows_run, held = traced_stage(mine)
    batch = num_microbatches * rows
    inputs = torch.randn(batch, DIM, generator=mine) if rank == 0 else None
    targets = torch.randn(batch, DIM, generator=mine) if rank == world_size - 1 else None
    order = orders(world_size, rank, num_microbatches) if callable(orders) else orders[rank]
    asked = list(order) if isinstance(order, (list, tuple)) else order
    with CommLog(count_collectives=False, keep_sent=True) as log:
        loss = run(
            stage,
            list(order),
            None if inputs is None else inputs.clone(),
            None if targets is None else targets.clone(),
            batch,
            num_microbatches,
        )
    kept_after = held.counted()
    return {
        "held": held.peak,
        "kept_after": kept_after,
        "loss": loss.detach().clone() if isinstance(loss, torch.Tensor) else loss,
        "grads": [None if p.grad is None else p.grad.clone() for p in stage.layers.parameters()],
        "state": stage.layers.state_dict(),
        "inputs": inputs,
        "targets": targets,
        "journal": list(journal),
        "rows": rows_run,
        "order": asked,
        "summary": log.summary(),
    }


def _reference_step(per_rank: list[dict]) -> dict:
    """The whole model on the whole batch, in one process: the loss, each stage's gradients, and
    what each stage must send: its output forwards, the gradient of its input backwards."""
    stages = stages_from([got["state"] for got in per_rank])
    x, entering, leaving = per_rank[0]["inputs"], [], []
    for stage in stages:
        entering.append(x)
        if x.requires_grad:
            x.retain_grad()
        x = stage(x)
        leaving.append(x)
    loss = F.mse_loss(x, per_rank[-1]["targets"])
    loss.backward()
    return {
        "loss": loss.detach(),
        "grads": [[p.grad for p in stage.parameters()] for stage in stages],
        "activations": [y.detach() for y in leaving],
        "input_grads": [None if x.grad is None else x.grad.detach() for x in entering],
    }


_NAMES = [f"layer {i}'s {kind}" for i in range(LAYERS_PER_STAGE) for kind in ("weight", "bias")]


def _latest_first(order: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
    """``order`` run with each backward on the latest micro-batch still held."""
    held: list[int] = []
    ran = []
    for kind, i in order:
        if kind == "F":
            held.append(i)
            ran.append((kind, i))
        elif held:
            ran.append((kind, max(held)))
            held.remove(max(held))
    return ran


def _check_step(
    what: str, per_rank: list[dict], num_microbatches: int, rows: int, alive: Callable | None
) -> None:
    """Loss, gradients, the order each stage really ran, and the messages of one pipeline step."""
    __tracebackhide__ = True
    world_size, m = len(per_rank), num_microbatches
    reference = _reference_step(per_rank)
    loss, grads = reference["loss"], reference["grads"]
    for rank, got in enumerate(per_rank):
        where = f"{what}: stage {rank}"
        _no_collectives(where, got["summary"])
        trace = [(kind, i) for kind, i, _ in got["journal"]]
        _rows_run(where, got["rows"], [rows] * m)
        if trace != got["order"]:
            latest = ""
            if trace == _latest_first(got["order"]):
                latest = (
                    " Each backward ran on the latest micro-batch still held, not on the one the order names."
                )
            fail(
                f"{where} ran {_show(trace)}, as its stage's trace shows; it was asked to run "
                f"{_show(got['order'])}.{latest} (A backward is noted when it has gone through every layer "
                "of the stage.)"
            )
        _held(
            where, got, alive(world_size, rank, m) if alive else peak_alive(got["order"]), alive is not None
        )
        if rank == world_size - 1:
            hints = {
                "leave out the 1/m: add up the micro-batches' losses without dividing by their number": loss
                * m
            }
            _expect(f"{where}: the returned loss (of the whole batch)", got["loss"], loss, hints)
        elif got["loss"] is not None:
            fail(f"{where} returned {got['loss']!r:.60}: only the last stage has the loss; return None.")
        for name, actual, expected in zip(_NAMES, got["grads"], grads[rank], strict=True):
            if actual is None:
                fail(
                    f"{where}: {name} has no gradient. Its stage's backward never reached it: what does "
                    "autograd need to know about the activation a stage receives?"
                )
            hints = {"leave out the 1/m: each micro-batch's loss is a mean over its own rows": expected * m}
            _expect(f"{where}: {name}'s gradient", actual, expected, hints)
        values = rows * DIM
        want = [(rank + 1, values)] * m if rank < world_size - 1 else []
        want += [(rank - 1, values)] * m if rank > 0 else []
        summary = got["summary"]
        if sorted(summary["sends"]) != sorted(want):
            fail(
                f"{where} sent {_messages(summary['sends'])}; expected each micro-batch's activation "
                f"to the next stage and its gradient to the previous one: {_messages(want)}."
            )
        if sorted(summary["recvs"], key=str) != sorted(want, key=str):
            fail(
                f"{where} received {_messages(summary['recvs'])}; expected each micro-batch's activation "
                "from the previous stage and its gradient from the next one, naming the sender: "
                f"{_messages(want)}."
            )
        _steps_and_messages(where, got["journal"], summary["messages"], rank, world_size)
        sent = list(zip(summary["sends"], summary["sent"], strict=True))
        for peer, kind, expected in (
            (rank + 1, "activation", reference["activations"][rank]),
            (rank - 1, "gradient", reference["input_grads"][rank]),
        ):
            for i, tensor in enumerate(t for (p, _), t in sent if p == peer):
                _expect(
                    f"{where}: the {kind} it sent for micro-batch {i}",
                    tensor,
                    expected[i * rows : (i + 1) * rows],
                )


_NONE_SENT = ("Expected parameter `tensor` of type torch.Tensor", "but got <class 'NoneType'>")


def _schedule_ranks(world_size: int, *args: Any) -> list:
    """``run_ranks`` of a schedule, a send of None (an input's missing gradient) named first."""
    __tracebackhide__ = True
    try:
        return run_ranks(_schedule_on_rank, world_size, *args, what="run_schedule")
    except CheckFailed as err:
        if not all(part in str(err) for part in _NONE_SENT):
            raise
        report = str(err)
    fail(
        "A send was given None where a tensor was expected: a received activation's .grad stays None "
        "unless the activation was marked as requiring a gradient before the stage ran on it, and then "
        f"the stage has nothing to send back.\n{report}"
    )


def check_run_schedule(
    run: Callable, world_sizes: Sequence[int], num_microbatches: Sequence[int], rows: int = 3
) -> None:
    """Check ``run(stage, order, inputs, targets, batch_size, num_microbatches)`` with GPipe's order
    for every world size and number of micro-batches given."""
    __tracebackhide__ = True
    for world_size in world_sizes:
        for m in num_microbatches:
            orders = [gpipe_order(world_size, s, m) for s in range(world_size)]
            what = f"GPipe on {counted(world_size, 'stage')}, {_microbatches(m)} of {rows} rows"
            per_rank = _schedule_ranks(world_size, run, orders, m, rows)
            _check_step(what, per_rank, m, rows, alive=None)


def check_run_written_orders(run: Callable, names: Sequence[str], rows: int = 2) -> None:
    """Check ``run`` with orders written out by hand (`WRITTEN_ORDERS`), forwards and backwards
    interleaved."""
    __tracebackhide__ = True
    for name in names:
        orders = written_order(name)
        m = len(orders[0]) // 2
        per_rank = _schedule_ranks(len(orders), run, orders, m, rows)
        _check_step(f"the order {name}", per_rank, m, rows, alive=None)


# -- exercise: 1F1B ------------------------------------------------------------------------------


def check_one_f_one_b(one_f_one_b: Callable, cases: Sequence[tuple[int, int]]) -> None:
    """Check the pure function ``one_f_one_b(num_stages, stage, num_microbatches)``, for every
    stage of each (stages, micro-batches) case, against what defines 1F1B: every micro-batch's
    forward and backward once, both in micro-batch order; a warm-up of as many forwards as there
    are micro-batches in flight from this stage to the last; then one backward, one forward,
    while forwards remain; then the backwards left."""
    __tracebackhide__ = True
    for p, m in cases:
        for s in range(p):
            what = f"one_f_one_b({p}, {s}, {m})"
            got = one_f_one_b(p, s, m)
            if _type(got) is not list or any(
                _type(step) is not tuple
                or len(step) != 2
                or step[0] not in ("F", "B")
                or _type(step[1]) is not int
                for step in got
            ):
                fail(f"{what}: expected a list of ('F', i) and ('B', i) tuples, got {got!r:.120}.")
            forwards = [i for kind, i in got if kind == "F"]
            backwards = [i for kind, i in got if kind == "B"]
            if forwards != list(range(m)) or backwards != list(range(m)):
                fail(
                    f"{what} is {_show(got)}: expected every micro-batch's forward and backward once, "
                    f"each in order 0 to {m - 1}."
                )
            warm_up = next((k for k, (kind, _) in enumerate(got) if kind == "B"), len(got))
            want = min(p - s, m)
            if warm_up != want:
                if warm_up == m and m > want:
                    problem = "that is GPipe's order, which holds every micro-batch's activations"
                elif warm_up > want:
                    problem = f"stage {s} would hold {warm_up} micro-batches' activations, more than it needs"
                else:
                    problem = "the stages after it would wait for micro-batches it has not sent"
                fail(
                    f"{what} is {_show(got)}: {warm_up} forwards before the first backward; {problem}. How "
                    f"many micro-batches can be in flight between stage {s} and the last stage?"
                )
            rest = [kind for kind, _ in got[warm_up:]]
            remaining_forwards = m - warm_up
            steady = rest[: 2 * remaining_forwards]
            if steady != ["B", "F"] * remaining_forwards:
                fail(
                    f"{what} is {_show(got)}: after the warm-up, 1F1B alternates one backward and one "
                    "forward while forwards remain, so that a new activation arrives only as an old one is "
                    "freed."
                )


def check_one_f_one_b_run(
    one_f_one_b: Callable,
    run: Callable,
    world_sizes: Sequence[int],
    num_microbatches: Sequence[int],
    rows: int = 2,
) -> None:
    """Run ``run`` with each stage's ``one_f_one_b`` order: the loss and gradients of the whole
    batch, each stage running the order it was given, and holding at most min(p - s, m)
    micro-batches' activations, as its trace measured."""
    __tracebackhide__ = True
    for world_size in world_sizes:
        for m in num_microbatches:
            what = f"1F1B on {counted(world_size, 'stage')}, {_microbatches(m)}"
            per_rank = _schedule_ranks(world_size, run, one_f_one_b, m, rows)
            _check_step(what, per_rank, m, rows, alive=lambda p, s, m: min(p - s, m))
