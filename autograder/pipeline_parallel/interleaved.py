"""Checks for notebook 06's interleaved stages on real ranks: a runner that holds several chunks
of layers per rank, and the step's time predicted before it is measured.

Each rank is given ``v`` traced chunks (`traced_stage`), chunk ``c`` of rank ``d`` being virtual
stage ``c * p + d``, with weights drawn inside the rank. The whole model of ``p * v`` virtual
stages is assembled here, in that order, and is the reference: the loss, every chunk's
gradients, and what each chunk must send (its output forwards, the gradient of its input
backwards). The chunks' records, merged by the rank's event numbers, give the order the rank
really ran; weak references count the micro-batches each chunk held.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from ..checks import close_floats, counted, expect_floats, fail, private_generator, run_ranks
from ..comm import CommLog
from .costs import interleaved_order
from .stage import DIM, LAYERS_PER_STAGE, Held, stages_from, traced_stage

_type = type
_NAMES = [f"layer {i}'s {kind}" for i in range(LAYERS_PER_STAGE) for kind in ("weight", "bias")]


def breadth_first_order(num_devices: int, device: int, num_microbatches: int, num_chunks: int) -> list:
    """Every micro-batch through chunk 0, then through chunk 1, ...; then the backwards, the last
    chunk first: another valid order for interleaved stages (interleaved_order in one group)."""
    return interleaved_order(num_microbatches, device, num_microbatches, num_chunks)


ORDERS = {"interleaved": interleaved_order, "breadth-first": breadth_first_order}


def _on_rank(
    rank: int, world_size: int, run: Callable, order_of: str | Callable, num_chunks: int, m: int, rows: int
) -> dict:
    mine = private_generator()
    traced = [traced_stage(mine) for _ in range(num_chunks)]
    chunks = [stage for stage, _, _, _ in traced]
    on_rank = Held()  # every chunk's micro-batches together: what the rank holds at once
    for c, stage in enumerate(chunks):
        if c * world_size + rank > 0:  # every input but the data is another chunk's output
            stage.register_forward_pre_hook(_input_needs_gradient(c * world_size + rank))
        stage.layers[0].register_forward_pre_hook(lambda module, args: on_rank.before_forward())
        stage.layers[0].register_forward_hook(lambda module, args, out: on_rank.after_forward(out))
    batch = m * rows
    inputs = torch.randn(batch, DIM, generator=mine) if rank == 0 else None
    targets = torch.randn(batch, DIM, generator=mine) if rank == world_size - 1 else None
    order = (ORDERS[order_of] if _type(order_of) is str else order_of)(world_size, rank, m, num_chunks)
    with CommLog(count_collectives=False, keep_sent=True) as log:
        loss = run(
            chunks,
            list(order),
            None if inputs is None else inputs.clone(),
            None if targets is None else targets.clone(),
            batch,
            m,
        )
    ran = sorted((seq, kind, i, c) for c, (_, journal, _, _) in enumerate(traced) for kind, i, seq in journal)
    return {
        "order": order,
        "ran": [(kind, i, c) for _, kind, i, c in ran],
        "rows": [rows_run for _, _, rows_run, _ in traced],
        "held": [held.peak for _, _, _, held in traced],
        "held_on_rank": on_rank.peak,
        "kept_after": [held.counted() for _, _, _, held in traced],
        "loss": loss.detach().clone() if isinstance(loss, torch.Tensor) else loss,
        "grads": [
            [None if p.grad is None else p.grad.clone() for p in stage.layers.parameters()]
            for stage in chunks
        ],
        "states": [stage.layers.state_dict() for stage in chunks],
        "inputs": inputs,
        "targets": targets,
        "summary": log.summary(),
    }


def _input_needs_gradient(virtual: int) -> Callable:
    """A pre-hook that stops a rank at once where a virtual stage after the first is given an
    input that needs no gradient: that gradient would never go back to the rank that sent the
    input, which would wait for it forever (a deadlock, whose report could not say why)."""

    def hook(module: torch.nn.Module, args: tuple) -> None:
        if not args[0].requires_grad:
            raise RuntimeError(
                f"virtual stage {virtual}'s input needs no gradient, so no gradient of it can be sent back"
            )

    return hook


def _run_model(stages: list, inputs: torch.Tensor, targets: torch.Tensor) -> dict:
    """The model of these stages, in this order, on the whole batch, in one process."""
    x, entering, leaving = inputs, [], []
    for stage in stages:
        entering.append(x)
        if x.requires_grad:
            x.retain_grad()
        x = stage(x)
        leaving.append(x)
    loss = F.mse_loss(x, targets)
    loss.backward()
    return {
        "loss": loss.detach(),
        "grads": [[p.grad for p in stage.parameters()] for stage in stages],
        "activations": [y.detach() for y in leaving],
        "input_grads": [None if x.grad is None else x.grad.detach() for x in entering],
    }


def _show(steps: Sequence) -> str:
    shown = " ".join(f"{kind}{i}/{c}" for kind, i, c in steps[:16])
    return (shown + (" ..." if len(steps) > 16 else "")) or "nothing"


def _messages(messages: Sequence[tuple[int | None, int]]) -> str:
    counts: dict = {}
    for peer, n in messages:
        counts[(peer, n)] = counts.get((peer, n), 0) + 1
    return ", ".join(
        f"{k} x {n} values to/from rank {peer}" for (peer, n), k in sorted(counts.items(), key=str)
    )


def check_run_interleaved(
    run: Callable,
    cases: Sequence[tuple[int, int, int]],
    order_name: str = "interleaved",
    rows: int = 2,
    order_of: Callable | None = None,
    most_on_rank: Callable | None = None,
) -> None:
    """Check ``run(chunks, order, inputs, targets, batch_size, num_microbatches)`` on ``p`` ranks
    of ``v`` chunks each, for every (p, v, m) case: the loss and every chunk's gradients of the
    model whose virtual stage ``c * p + d`` is chunk ``c`` of rank ``d``; each rank running its
    order; each chunk freeing a micro-batch's activations after its backward; and every message
    between the right ranks, with the right contents. ``order_of(p, d, m, v)`` gives the orders
    instead of ``order_name``'s; ``most_on_rank(p, d, m, v)``, where given, bounds the micro-batch
    chunks a rank may hold at once, all its chunks together, as measured."""
    __tracebackhide__ = True
    for p, v, m in cases:
        what = f"run_interleaved on {counted(p, 'rank')} of {counted(v, 'chunk')}, {m} micro-batches"
        what += f" ({order_name} order)"
        keyed_by_micro_batch = (
            "a lookup found no entry (KeyError): is what each forward keeps for its backward stored under "
            "its micro-batch alone? A rank runs each micro-batch once in every one of its chunks, so a later "
            "chunk's forward would replace an earlier chunk's."
        )
        per_rank = run_ranks(
            _on_rank,
            p,
            run,
            order_of or order_name,
            v,
            m,
            rows,
            timeout=15,
            what="run_interleaved",
            diagnoses={
                "raised KeyError": keyed_by_micro_batch,
                "input needs no gradient": (
                    "an activation received from another rank is an input that needs a gradient "
                    "(requires_grad_()) before its chunk runs, on every rank: the rank that sent it waits "
                    "for that gradient in backward. Only virtual stage 0's input, on rank 0, is data."
                ),
            },
        )
        states = [per_rank[k % p]["states"][k // p] for k in range(p * v)]
        inputs, targets = per_rank[0]["inputs"], per_rank[-1]["targets"]
        reference = _run_model(stages_from(states), inputs, targets)
        by_rank = [per_rank[d]["states"][c] for d in range(p) for c in range(v)]
        contiguous = _run_model(stages_from(by_rank), inputs, targets)["loss"]
        # The loss first: where the chunks were chained in the wrong order, it says so best.
        _check_loss(f"{what}: rank {p - 1}", per_rank[-1]["loss"], reference["loss"], m, contiguous)
        for d, got in enumerate(per_rank):
            _check_rank(f"{what}: rank {d}", got, d, p, v, m, rows, reference)
            if most_on_rank is not None and got["held_on_rank"] > most_on_rank(p, d, m, v):
                gpipe = (
                    ": every micro-batch of every chunk, as interleaved GPipe holds them"
                    if got["held_on_rank"] == m * v
                    else ""
                )
                fail(
                    f"{what}: rank {d} held the activations of {got['held_on_rank']} micro-batch chunks at "
                    f"once, all its chunks together{gpipe}; interleaved 1F1B holds at most "
                    f"{most_on_rank(p, d, m, v)} there. Does each rank start its backwards once its warm-up "
                    "is done?"
                )


def _check_loss(where: str, loss: Any, expected: torch.Tensor, m: int, contiguous: torch.Tensor) -> None:
    __tracebackhide__ = True
    hints = {
        "route the micro-batches as if rank d held the consecutive virtual stages d * v to d * v + v - 1: "
        "chunk c of rank d is virtual stage c * p + d": contiguous,
        "leave out the 1/m: add up the micro-batches' losses without dividing by their number": expected * m,
    }
    expect_floats(
        f"{where}: the returned loss", loss, expected, "the single-process model's", mistakes=hints, atol=1e-6
    )


def _check_rank(where: str, got: dict, d: int, p: int, v: int, m: int, rows: int, reference: dict) -> None:
    __tracebackhide__ = True
    summary = got["summary"]
    if summary["calls"]:
        fail(
            f"{where} issued {summary['calls'][0][0]}: chunks pass their tensors with sends and receives "
            "only."
        )
    for c in range(v):
        if got["rows"][c] != [rows] * m:
            fail(
                f"{where}: chunk {c} ran its layers on inputs of {got['rows'][c]} rows; expected each of the "
                f"{m} micro-batches of {rows} rows once."
            )
    if got["ran"] != got["order"]:
        first = next(
            (k for k, (a, b) in enumerate(zip(got["ran"], got["order"], strict=False)) if a != b),
            min(len(got["ran"]), len(got["order"])),
        )
        fail(
            f"{where} ran {_show(got['ran'])} (kind, micro-batch / chunk), as its chunks' traces show; it "
            f"was asked to run {_show(got['order'])}. They part at step {first}. (A backward is noted when "
            "it has gone through every layer of its chunk.)"
        )
    for c in range(v):
        steps = [(kind, i) for kind, i, chunk in got["order"] if chunk == c]
        alive = most = 0
        for kind, _ in steps:
            alive += 1 if kind == "F" else -1
            most = max(most, alive)
        if got["held"][c] > most:
            fail(
                f"{where}: chunk {c} held the activations of {got['held'][c]} micro-batches at once; its "
                f"order needs at most {most}. Is each micro-batch's graph freed once its backward has run?"
            )
        if got["kept_after"][c]:
            fail(
                f"{where}: chunk {c} still held the activations of {got['kept_after'][c]} micro-batch(es) "
                "after the step had returned."
            )
    if d < p - 1 and got["loss"] is not None:
        fail(f"{where} returned {got['loss']!r:.60}: only the rank of the last virtual stage has the loss.")
    for c in range(v):
        k = c * p + d
        for name, actual, expected in zip(_NAMES, got["grads"][c], reference["grads"][k], strict=True):
            chunk = f"chunk {c} (virtual stage {k})"
            if actual is None:
                fail(
                    f"{where}: {chunk}: {name} has no gradient. Did every backward reach it, with the "
                    "gradient of its output from the virtual stage after it?"
                )
            hints = {
                "leave out the 1/m": expected * m,
                "let no gradient reach this chunk (the gradient of its output came back as zeros: does every "
                "activation a chunk receives require a gradient?)": expected * 0,
            }
            expect_floats(
                f"{where}: {chunk}: {name}'s gradient",
                actual,
                expected,
                "the single-process model's",
                mistakes=hints,
                atol=1e-6,
            )
    _check_messages(where, summary, d, p, v, m, rows, reference)


def _check_messages(
    where: str, summary: dict, d: int, p: int, v: int, m: int, rows: int, reference: dict
) -> None:
    """Each chunk sends its output to the next virtual stage's rank and its input's gradient to the
    previous one's, once per micro-batch, and what it sends is what the whole model computes there."""
    __tracebackhide__ = True
    expected = []  # (peer, what, tensor)
    for c in range(v):
        k = c * p + d
        for i in range(m):
            piece = slice(i * rows, (i + 1) * rows)
            if k < p * v - 1:
                expected.append(
                    (
                        (d + 1) % p,
                        f"chunk {c}'s output for micro-batch {i}",
                        reference["activations"][k][piece],
                    )
                )
            if k > 0:
                expected.append(
                    (
                        (d - 1) % p,
                        f"chunk {c}'s input gradient for micro-batch {i}",
                        reference["input_grads"][k][piece],
                    )
                )
    want = [(peer, rows * DIM) for peer, _, _ in expected]
    if sorted(summary["sends"], key=str) != sorted(want, key=str):
        fail(
            f"{where} sent {_messages(summary['sends']) or 'no messages'}; expected {_messages(want)}: each "
            "chunk's output to the rank of the next virtual stage, its input's gradient to the rank of the "
            "previous one (rank p - 1's chunk c feeds rank 0's chunk c + 1)."
        )
    incoming = []
    for c in range(v):
        k = c * p + d
        incoming += [((d - 1) % p, rows * DIM)] * (m if k > 0 else 0)
        incoming += [((d + 1) % p, rows * DIM)] * (m if k < p * v - 1 else 0)
    recvs = [(peer, n) for peer, n in summary["recvs"]]
    if sorted(recvs, key=str) != sorted(incoming, key=str):
        fail(
            f"{where} received {_messages(recvs) or 'no messages'}; expected {_messages(incoming)}, naming "
            "the sender."
        )
    unmatched = list(expected)
    for (peer, _), tensor in zip(summary["sends"], summary["sent"], strict=True):
        match = next(
            (
                e
                for e in unmatched
                if e[0] == peer and tensor is not None and close_floats(tensor, e[2], 1e-6)
            ),
            None,
        )
        if match is None:
            left = ", ".join(name for q, name, _ in unmatched if q == peer)[:200]
            fail(
                f"{where} sent rank {peer} a tensor that is none of what it owes that rank ({left}), as the "
                "single-process model computes them. Does each message carry the right micro-batch of the "
                "right chunk?"
            )
        unmatched.remove(match)


# -- the step's time, predicted --------------------------------------------------------------------

TIMED = {"p": 4, "m": 4, "forward_ms": 30.0, "backward_ms": 60.0}  # a GPU's whole stage, per micro-batch


def step_ms(simulate_interleaved: Callable, num_chunks: int) -> float:
    """The step's length by ``simulate_interleaved``, on TIMED's pipeline cut in ``num_chunks``."""
    p, m, v = TIMED["p"], TIMED["m"], num_chunks
    orders = [interleaved_order(p, d, m, v) for d in range(p)]
    times = simulate_interleaved(orders, v, TIMED["forward_ms"] / v, TIMED["backward_ms"] / v)
    return max(end for _, end in times.values()) - min(start for start, _ in times.values())


def _reference_step_ms(num_chunks: int) -> float:
    from .costs import reference_simulate_interleaved

    return step_ms(reference_simulate_interleaved, num_chunks)


def check_step_predictions(
    gpipe_ms: Any, interleaved_ms: Any, simulate_interleaved: Callable, interleaved_bubble: Callable
) -> None:
    """The predicted step times of TIMED's pipeline, with one chunk per GPU and with two, against
    the truth, or what the student's own simulator or bubble formula gives (so that a mistake
    there costs no marks twice)."""
    __tracebackhide__ = True
    p, m, work = TIMED["p"], TIMED["m"], TIMED["m"] * (TIMED["forward_ms"] + TIMED["backward_ms"])
    for name, value, v in (("gpipe_step_ms", gpipe_ms, 1), ("interleaved_step_ms", interleaved_ms, 2)):
        if _type(value) not in (int, float) or not math.isfinite(value):
            fail(f"{name} should be a number of milliseconds, got {value!r:.60}.")
        accepted = [_reference_step_ms(v)]
        with contextlib.suppress(Exception):  # a broken simulator: judged against the truth alone
            accepted.append(float(step_ms(simulate_interleaved, v)))
        with contextlib.suppress(Exception):
            accepted.append(work / (1 - float(interleaved_bubble(p, v, m))))
        if any(math.isclose(value, a, rel_tol=0.02) for a in accepted):
            continue
        mistakes = {
            "give each chunk a whole stage's time; a chunk is 1/v of the stage's layers": _reference_step_ms(
                v
            )
            * v,
            "leave out the bubble": work,
        }
        if v == 2:
            mistakes[
                "keep GPipe's bubble: with two chunks the pipeline fills in chunk-steps, half as long"
            ] = _reference_step_ms(1)
            mistakes["halve the whole step: interleaving shrinks only the bubble, and the work stays"] = (
                _reference_step_ms(1) / 2
            )
        hint = next(
            (
                f" That is what you get if you {mistake}."
                for mistake, x in mistakes.items()
                if math.isclose(value, x, rel_tol=0.02)
            ),
            "",
        )
        fail(
            f"{name} = {value:.4g} ms is neither what your simulate_interleaved nor your interleaved_bubble "
            f"gives for this pipeline.{hint} Simulate interleaved_order(4, d, 4, {v}) for every GPU d, a "
            "chunk's forward and backward lasting their share of the stage's."
        )
