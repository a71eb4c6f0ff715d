"""Visible checks of notebook 06's bubble formulas: the shape any right formula has (no bubble on
one stage, a share of the step between 0 and 1, smaller with more micro-batches, smaller with
more chunks), never an expected value, which the hidden tests alone compare."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

from ..checks import fail, plain_number

OTHER_CONVENTION = "divide the idle time by the work, the other convention"


def _fraction(function: Callable, *args: int) -> float:
    """``function(*args)`` as a float, or a failure that says what came back instead."""
    __tracebackhide__ = True
    call = f"{function.__name__}{args}"
    value = function(*args)
    number = plain_number(value)
    if number is None or type(number) is bool or not math.isfinite(number):
        fail(f"{call} should return a number, got {value!r:.60} ({type(value).__name__}).")
    return float(number)


def _no_bubble_on_one_stage(function: Callable, calls: list[tuple[int, ...]]) -> None:
    __tracebackhide__ = True
    for args in calls:
        value = _fraction(function, *args)
        if not math.isclose(value, 0.0, abs_tol=1e-12):
            fail(
                f"{function.__name__}{args} = {value:.4g}: with one stage nothing waits for anything, so "
                "there is no bubble."
            )


def _within_the_step(function: Callable, calls: list[tuple[int, ...]]) -> None:
    __tracebackhide__ = True
    for args in calls:
        value = _fraction(function, *args)
        if value <= 0:
            fail(
                f"{function.__name__}{args} = {value:.4g}: with more than one stage, the last waits for "
                "its first micro-batch to reach it, so the bubble is more than 0 (an integer division?)."
            )
        if value >= 1:
            fail(
                f"{function.__name__}{args} = {value:.4g} is not below 1. The course's bubble is the share "
                f"of the step's time a stage idles; if you {OTHER_CONVENTION}, it can reach 1 and more."
            )


def _shrinks(function: Callable, calls: list[tuple[int, ...]], what: str, why: str) -> None:
    """``function`` at each call is smaller than at the one before it."""
    __tracebackhide__ = True
    for before, after in itertools.pairwise(calls):
        if not _fraction(function, *after) < _fraction(function, *before):
            fail(f"{function.__name__}{after} is not smaller than {function.__name__}{before}: {what}. {why}")


def check_bubble_shape(bubble_fraction: Callable[[int, int], Any]) -> None:
    """GPipe's bubble on p stages with m micro-batches: none on one stage, a share of the step,
    smaller as m grows and larger as p grows."""
    __tracebackhide__ = True
    _no_bubble_on_one_stage(bubble_fraction, [(1, m) for m in (1, 3, 8)])
    _within_the_step(bubble_fraction, [(p, m) for p in (2, 3, 5, 8) for m in (1, 2, 7, 40)])
    for p in (2, 4, 7):
        _shrinks(
            bubble_fraction,
            [(p, m) for m in (1, 2, 3, 5, 8, 13, 32, 100)],
            "more micro-batches should shrink the bubble",
            "The stages wait as long at each end of the step, whatever m; the work grows with m.",
        )
    for m in (1, 4, 16):
        _shrinks(
            bubble_fraction,
            [(p, m) for p in (8, 5, 3, 2)],
            "fewer stages should mean a smaller bubble",
            "The more stages come before the last, the later it starts.",
        )


def check_interleaved_bubble_shape(interleaved_bubble: Callable[[int, int, int], Any]) -> None:
    """The interleaved bubble on p GPUs of v chunks with m micro-batches (m a multiple of p): none
    on one GPU, a share of the step, smaller as m grows and as v grows."""
    __tracebackhide__ = True
    _no_bubble_on_one_stage(interleaved_bubble, [(1, v, m) for v, m in [(1, 2), (2, 3), (4, 5)]])
    _within_the_step(
        interleaved_bubble, [(p, v, k * p) for p in (2, 4, 8) for v in (1, 2, 5) for k in (1, 3)]
    )
    for p, v in [(2, 2), (4, 3), (8, 2)]:
        _shrinks(
            interleaved_bubble,
            [(p, v, k * p) for k in (1, 2, 4, 8)],
            "more micro-batches should shrink the bubble",
            "The GPUs wait as long at each end of the step, whatever m; the work grows with m.",
        )
    for p, m in [(2, 4), (4, 8), (8, 16)]:
        _shrinks(
            interleaved_bubble,
            [(p, v, m) for v in (1, 2, 3, 5)],
            "more chunks per GPU should shrink the bubble",
            "Cutting each stage into chunks shortens the wait at each end of the step (your "
            "simulation shows it). Did you leave out the chunks?",
        )
