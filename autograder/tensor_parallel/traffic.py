"""Visible checks of notebook 05's byte counts (exercise 6): how each count grows with the tokens,
the width, the bytes a value and the number of GPUs, and how the counts compare. They compare a
student's function with itself and with the student's other functions, and print only the
student's own numbers: the values themselves are checked when the notebook is graded."""

from __future__ import annotations

import math
from collections.abc import Callable

from ..checks import fail, plain_number

TOKENS, HIDDEN, P, BYTES = 2048, 4096, 8, 2  # a step of bf16 activations on an 8-GPU node


def _bytes(function: Callable, *args: int) -> float:
    """``function(*args)`` as a float, or a failure that says what it returned instead."""
    __tracebackhide__ = True
    call = f"{function.__name__}{args}"
    answer = function(*args)
    number = plain_number(answer)
    if number is None or not math.isfinite(number):
        fail(f"{call} returned {answer!r}; expected a number of bytes (a float).")
    if number < 0:
        fail(f"{call} = {number:.6g}: a GPU cannot send a negative number of bytes.")
    return float(number)


def _expect_scaled(function: Callable, base: tuple, scaled: tuple, factor: float, why: str) -> None:
    """``function(*scaled)`` is ``factor`` times ``function(*base)``; otherwise fail with ``why``."""
    __tracebackhide__ = True
    one, other = _bytes(function, *base), _bytes(function, *scaled)
    if not math.isclose(other, factor * one, rel_tol=1e-9, abs_tol=1e-12):
        name = function.__name__
        fail(f"{name}{scaled} = {other:.6g} is not {factor:g} times {name}{base} = {one:.6g}: {why}")


def _expect_nothing_sent_alone(function: Callable, args: tuple) -> None:
    __tracebackhide__ = True
    sent = _bytes(function, *args)
    if sent != 0:
        fail(
            f"{function.__name__}{args} = {sent:.6g}, but with p=1 a GPU has no other GPU to send to: "
            "every ring collective sends nothing. Count what each GPU sends in a ring, not the "
            "whole tensor."
        )


def _expect_more_with_more_gpus(function: Callable, before: tuple, after: tuple) -> None:
    __tracebackhide__ = True
    few, many = _bytes(function, *before), _bytes(function, *after)
    if not 0 < few <= many:
        name = function.__name__
        fail(
            f"{name}{after} = {many:.6g} against {name}{before} = {few:.6g}: in a ring collective each "
            "GPU's share of the traffic does not shrink as GPUs join (notebook 02), and with more "
            "than one GPU it is more than nothing."
        )


def check_mlp_bytes_scaling(tp_mlp_bytes: Callable, dp_mlp_bytes: Callable) -> None:
    """How `tp_mlp_bytes(tokens, hidden, p, bytes_per_value)` and
    `dp_mlp_bytes(hidden, p, bytes_per_value)` grow, without their values."""
    __tracebackhide__ = True
    t, h, p, b = TOKENS, HIDDEN, P, BYTES
    _expect_scaled(
        tp_mlp_bytes,
        (t, h, p, b),
        (2 * t, h, p, b),
        2,
        "tensor parallelism all_reduces activations of tokens × hidden values, so twice the tokens "
        "send twice the bytes.",
    )
    _expect_scaled(
        tp_mlp_bytes,
        (t, h, p, b),
        (t, 2 * h, p, b),
        2,
        "the activations tensor parallelism all_reduces hold tokens × hidden values, so twice the "
        "width sends twice the bytes.",
    )
    _expect_scaled(
        tp_mlp_bytes, (t, h, p, b), (t, h, p, 2 * b), 2, "bytes_per_value is the size of every value sent."
    )
    _expect_nothing_sent_alone(tp_mlp_bytes, (t, h, 1, b))
    _expect_more_with_more_gpus(tp_mlp_bytes, (t, h, 2, b), (t, h, p, b))
    _expect_scaled(
        dp_mlp_bytes,
        (h, p, b),
        (2 * h, p, b),
        4,
        "data parallelism sends the weights' gradients, and each weight has hidden × 4·hidden "
        "entries: twice the width, four times the bytes.",
    )
    _expect_scaled(
        dp_mlp_bytes, (h, p, b), (h, p, 2 * b), 2, "bytes_per_value is the size of every value sent."
    )
    _expect_nothing_sent_alone(dp_mlp_bytes, (h, 1, b))
    _expect_more_with_more_gpus(dp_mlp_bytes, (h, 2, b), (h, p, b))


def check_allgather_bytes_scaling(allgather_mlp_bytes: Callable, tp_mlp_bytes: Callable) -> None:
    """How `allgather_mlp_bytes(tokens, hidden, p, bytes_per_value)` grows, and that it is more
    than Megatron's `tp_mlp_bytes` for the same step, without their values."""
    __tracebackhide__ = True
    t, h, p, b = TOKENS, HIDDEN, P, BYTES
    _expect_scaled(
        allgather_mlp_bytes,
        (t, h, p, b),
        (2 * t, h, p, b),
        2,
        "the lecture's scheme gathers activations, one row a token, so twice the tokens send twice "
        "the bytes.",
    )
    _expect_scaled(
        allgather_mlp_bytes,
        (t, h, p, b),
        (t, h, p, 2 * b),
        2,
        "bytes_per_value is the size of every value sent.",
    )
    _expect_nothing_sent_alone(allgather_mlp_bytes, (t, h, 1, b))
    _expect_more_with_more_gpus(allgather_mlp_bytes, (t, h, 2, b), (t, h, p, b))
    lecture, megatron = _bytes(allgather_mlp_bytes, t, h, p, b), _bytes(tp_mlp_bytes, t, h, p, b)
    if not lecture > megatron:
        fail(
            f"allgather_mlp_bytes{(t, h, p, b)} = {lecture:.6g} is not more than "
            f"tp_mlp_bytes{(t, h, p, b)} = {megatron:.6g}: the lecture's scheme communicates after each "
            "of the two layers, one of them 4·hidden wide, where Megatron's communicates once, on "
            "hidden-wide activations, in each direction. Check both functions."
        )
