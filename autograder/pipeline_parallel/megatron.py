"""Checks for notebook 06's schedules beyond interleaved GPipe: Megatron-LM's interleaved 1F1B
(Narayanan et al., arXiv 2104.04473, sec. 2.2.2), which Llama 3 runs (arXiv 2407.21783, sec.
3.3.2), and the zero-bubble idea (Qi et al., arXiv 2401.10241), whose backward is split into the
input's gradient (B) and the weights' (W).

The orders here are those torch's ``ScheduleInterleaved1F1B`` and ``ScheduleInterleavedZeroBubble``
run (torch 2.13, for a number of micro-batches that is a multiple of the number of ranks), with
the empty slots torch keeps for timing left out: tests/test_pipeline_orders.py builds torch's
schedules and compares them step by step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..checks import counted, fail
from .costs import expect_simulated, simulate_steps

_type = type


def warm_up_forwards(num_devices: int, device: int, num_microbatches: int, num_chunks: int) -> int:
    """Forwards rank ``device`` runs before its first backward in interleaved 1F1B (v >= 2)."""
    p, d, m, v = num_devices, device, num_microbatches, num_chunks
    return min(2 * (p - 1 - d) + (v - 1) * p + 1, m * v)


def _kth(k: int, p: int, v: int, backward: bool) -> tuple[int, int]:
    """The micro-batch and chunk of a rank's k-th forward (or backward): groups of p micro-batches,
    chunk after chunk (the backwards from the last chunk)."""
    group, within = divmod(k, p * v)
    chunk, j = divmod(within, p)
    return group * p + j, (v - 1 - chunk if backward else chunk)


def reference_interleaved_1f1b(
    num_devices: int, device: int, num_microbatches: int, num_chunks: int
) -> list[tuple[str, int, int]]:
    """Rank ``device``'s steps in Megatron-LM's interleaved 1F1B: its warm-up of forwards, then one
    backward and one forward while forwards remain, then the backwards left."""
    p, v = num_devices, num_chunks
    total = num_microbatches * v
    warm = warm_up_forwards(p, device, num_microbatches, v)

    def forward(k: int) -> tuple[str, int, int]:
        return ("F", *_kth(k, p, v, backward=False))

    def backward(k: int) -> tuple[str, int, int]:
        return ("B", *_kth(k, p, v, backward=True))

    order = [forward(k) for k in range(warm)]
    for k in range(total - warm):
        order += [backward(k), forward(warm + k)]
    return order + [backward(k) for k in range(total - warm, total)]


def zero_bubble_order(
    num_devices: int, device: int, num_microbatches: int, num_chunks: int
) -> list[tuple[str, int, int]]:
    """Rank ``device``'s steps in torch's ``ScheduleInterleavedZeroBubble`` (Qi et al.'s ZB-H1 idea
    on interleaved chunks): ``("B", i, c)`` computes the gradient of the chunk's input alone, and
    ``("W", i, c)`` that of its weights, deferred by ``device`` steps and run in the gaps. Its
    warm-up is one forward per rank after it, not two."""
    p, d, m, v = num_devices, device, num_microbatches, num_chunks
    total = m * v
    warm = min((v - 1) * p + (p - 1 - d), total)
    forward = [("F", *_kth(k, p, v, backward=False)) for k in range(total)]
    backward = [("B", *_kth(k, p, v, backward=True)) for k in range(total)]
    order = forward[:warm]
    weights = 0  # W steps placed so far, in the order of their B
    for k in range(total - warm):
        order += [forward[warm + k], backward[k]]
        if k >= d:
            order.append(("W", *backward[weights][1:]))
            weights += 1
    for k in range(total - warm, total):
        order.append(backward[k])
        if k >= d:
            order.append(("W", *backward[weights][1:]))
            weights += 1
    return order + [("W", *step[1:]) for step in backward[weights:]]


def torch_order(actions: Sequence[Any], num_devices: int) -> list[tuple[str, int, int]]:
    """A rank's ``pipeline_order`` in torch's schedules as (kind, micro-batch, chunk) steps: its
    empty slots left out, a full backward or the input's one ``"B"``, the weights' ``"W"``."""
    # By the members' names: their values are letters in torch 2.13, numbers in 2.8.
    kinds = {"FORWARD": "F", "FULL_BACKWARD": "B", "BACKWARD_INPUT": "B", "BACKWARD_WEIGHT": "W"}
    return [
        (kinds[action.computation_type.name], action.microbatch_index, action.stage_index // num_devices)
        for action in actions
        if action is not None
    ]


def _show(steps: Sequence) -> str:
    shown = " ".join(f"{kind}{i}/{c}" for kind, i, c in steps[:24])
    return shown + (" ..." if len(steps) > 24 else "")


# -- exercise: the interleaved 1F1B order ----------------------------------------------------------


def check_interleaved_1f1b(fn: Callable, cases: Sequence[tuple[int, int, int]]) -> None:
    """Check the pure function ``fn(num_devices, device, num_microbatches, num_chunks)`` for every
    rank of each (p, v, m) case against Megatron-LM's interleaved 1F1B: each micro-batch's forward
    and backward once in every chunk; forwards depth-first in groups of p micro-batches, backwards
    from the last chunk; the warm-up; then one backward, one forward; then the backwards left."""
    __tracebackhide__ = True
    for p, v, m in cases:
        for d in range(p):
            what = f"interleaved_1f1b({p}, {d}, {m}, {v})"
            got = fn(p, d, m, v)
            if _type(got) is not list or any(
                _type(step) is not tuple
                or len(step) != 3
                or step[0] not in ("F", "B")
                or _type(step[1]) is not int
                or _type(step[2]) is not int
                for step in got
            ):
                fail(f"{what}: expected a list of ('F', i, c) and ('B', i, c) tuples, got {got!r:.120}.")
            want = reference_interleaved_1f1b(p, d, m, v)
            if sorted(got) != sorted(want):
                fail(
                    f"{what} is {_show(got)}: expected the forward and the backward of each of the {m} "
                    f"micro-batches in each of the {counted(v, 'chunk')}, once each."
                )
            forwards = [step for step in got if step[0] == "F"]
            if forwards != [step for step in want if step[0] == "F"]:
                fail(
                    f"{what} runs its forwards in the order {_show(forwards)}: Megatron-LM's goes "
                    f"depth-first, in groups of {p} micro-batches (one per rank), each through chunk 0, "
                    "then chunk 1, and so on, as interleaved_order does."
                )
            backwards = [step for step in got if step[0] == "B"]
            if backwards != [step for step in want if step[0] == "B"]:
                fail(
                    f"{what} runs its backwards in the order {_show(backwards)}: they go in the same groups "
                    "of micro-batches, each group through the last chunk first, as interleaved_order does."
                )
            warm = next((k for k, step in enumerate(got) if step[0] == "B"), len(got))
            right = warm_up_forwards(p, d, m, v)
            if warm != right:
                fail(f"{what} is {_show(got)}: {_warm_up_mistake(warm, right, p, d, m, v)}")
            if got != want:
                fail(
                    f"{what} is {_show(got)}: after its warm-up, a rank alternates one backward and one "
                    "forward while forwards remain (the backward first), then runs the backwards left."
                )


def _warm_up_mistake(warm: int, right: int, p: int, d: int, m: int, v: int) -> str:
    said = f"{warm} forwards before the first backward"
    if warm == m * v:
        return (
            f"{said}, every one: that is interleaved GPipe's, which holds every micro-batch of every chunk "
            "at once. Megatron-LM starts the backwards once the first can have come back."
        )
    named = [
        (
            right - 1,
            "one too few: the first backward cannot have come back yet. Count the forward the rank "
            "runs in the slot before its first backward can start",
        ),
        (min(p - d, m * v), "1F1B's warm-up without chunks, p - d"),
        (
            min((v - 1) * p + (p - 1 - d) + 1, m * v),
            "a warm-up that counts the ranks after this one once: "
            "micro-batch 0 must go to the last rank and its gradient come back, a slot a rank each way",
        ),
    ]
    matches = [mistake for count, mistake in named if count == warm]
    if matches:
        return f"{said}; that is {'; or '.join(matches)}."
    hint = "more than it needs, holding more activations" if warm > right else "the rank would wait"
    return (
        f"{said}, {hint}. In slots of one step each, when can micro-batch 0's backward in rank {d}'s last "
        "chunk be back, and how many forwards has the rank run by then?"
    )


def in_flight_bound(num_devices: int, device: int, num_microbatches: int, num_chunks: int) -> int:
    """The most micro-batch-chunks whose activations rank ``device`` holds at once in interleaved
    1F1B: its warm-up's forwards (each later forward follows a backward)."""
    return warm_up_forwards(num_devices, device, num_microbatches, num_chunks)


# -- exercise: zero bubble, simulated ---------------------------------------------------------------


def reference_simulate_zero_bubble(
    orders: Sequence[Sequence[tuple[str, int, int]]],
    num_chunks: int,
    forward: float,
    backward_input: float,
    backward_weight: float,
) -> dict:
    """When each step starts and ends, each as early as its device is free and what it waits for
    has finished (the checks' own simulation, ``costs.simulate_steps``, with the backward split)."""
    return simulate_steps(orders, num_chunks, {"F": forward, "B": backward_input, "W": backward_weight})


def check_simulate_zero_bubble(
    simulate: Callable,
    cases: Sequence[tuple[int, int, int]],
    forward: float = 1.0,
    backward_input: float = 1.0,
    backward_weight: float = 1.0,
) -> None:
    """Check ``simulate(orders, num_chunks, forward, backward_input, backward_weight)`` on the
    zero-bubble orders of each (p, v, m) case: every step a (start, end) of its kind's length, each
    device running its steps one at a time in its order, each step as early as it can."""
    __tracebackhide__ = True
    for p, v, m in cases:
        orders = [zero_bubble_order(p, d, m, v) for d in range(p)]
        what = (
            f"simulate_zero_bubble({p} devices x {counted(v, 'chunk')}, {m} micro-batches, "
            f"forward={forward:g}, backward_input={backward_input:g}, backward_weight={backward_weight:g})"
        )
        times = simulate([list(order) for order in orders], v, forward, backward_input, backward_weight)
        seconds = {"F": forward, "B": backward_input, "W": backward_weight}
        expect_simulated(what, times, orders, v, seconds, _why)


def _why(key: tuple, needs: list[tuple]) -> str:
    device, kind, i, chunk = key
    waited = ", ".join(str(n) for n in needs) or "nothing on another device"
    if kind == "B" and needs and needs[0][1] == "B" and needs[0][0] != device:
        return (
            f"as a B waits for the next virtual stage's B of its micro-batch ({needs[0]}) and no more: "
            "that B sent back the gradient of its input. The W that follows it there computes only its own "
            "weights' gradient, which no other stage needs."
        )
    if kind == "W":
        return f"as a W waits for nothing but device {device} being free and its own B, {needs[0]}."
    return f"when device {device} is free and {waited} has finished."


def check_interleaved_1f1b_run(
    interleaved_1f1b: Callable, run_interleaved: Callable, cases: Sequence[tuple[int, int, int]]
) -> None:
    """Run ``run_interleaved`` with each rank's ``interleaved_1f1b`` order, for every (p, v, m)
    case: the loss, the gradients and the messages of the whole model, each rank running its
    order, and holding at most its warm-up's forwards' micro-batch chunks at once, all its chunks
    together, as the chunks' traces measured."""
    __tracebackhide__ = True
    from .interleaved import check_run_interleaved

    # The run measures what the order holds: an order off the rule is named as such, not by what
    # it makes the run do (on 2 ranks, say, messages both ways between the same two ranks).
    check_interleaved_1f1b(interleaved_1f1b, cases)
    check_run_interleaved(
        run_interleaved,
        cases,
        order_name="interleaved 1F1B",
        order_of=interleaved_1f1b,
        most_on_rank=in_flight_bound,
    )
