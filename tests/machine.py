"""How much slower than idle this machine runs right now, for the suite's time limits.

The suite's limits (pytest's per-test timeouts, nbgrader's per-cell limit in the grading round
trip, the bounds of tests that time something) were set on an idle machine of two cores. On a
laptop that compiles something beside the suite, or with a second ``make test`` on the same cores,
everything takes longer, and a fixed limit fails tests that are right. So limits are scaled by how
slowly the machine runs *now*, measured rather than guessed: a busy loop in this thread runs for a
moment, and the ratio of the wall time that passed to the CPU time the thread got says what share
of a core a process gets. Idle, that is 1; with twice as many runnable processes as cores, about 2.
It needs no reference figure, so it means the same on a fast machine and a slow one.
"""

from __future__ import annotations

import time

import pytest

SAMPLE_SECONDS = 0.25  # long enough for the scheduler to share the core out, short enough to repeat
FRESH_SECONDS = 60.0  # a measurement older than this is taken again
BUSY = 1.5  # from this slowdown on, a time measured in a test says more about the machine than the code
MOST = 4.0  # limits stretch this far at most: past it, a hang would hold the suite for hours

_last: tuple[float, float] | None = None  # (when, slowdown)


def measure(seconds: float = SAMPLE_SECONDS) -> float:
    """Wall time over this thread's CPU time, for a busy loop of about ``seconds``: at least 1."""
    wall0, cpu0 = time.perf_counter(), time.thread_time()
    total = 0
    while time.perf_counter() - wall0 < seconds:
        for i in range(20_000):
            total += i
    wall, cpu = time.perf_counter() - wall0, time.thread_time() - cpu0
    return max(1.0, wall / max(cpu, 1e-3))


def slowdown() -> float:
    """How many times slower than idle the machine runs now (measured at most a minute ago)."""
    global _last
    now = time.monotonic()
    if _last is None or now - _last[0] > FRESH_SECONDS:
        _last = (now, min(MOST, measure()))
    return _last[1]


def scaled(seconds: float) -> float:
    """A time limit set on an idle machine, for this machine as it runs now."""
    return seconds * slowdown()


def expect_within(elapsed: float, bound: float, what: str) -> None:
    """Assert that ``what`` took under ``bound`` seconds; where it did not and the machine is busy,
    skip, saying so: a slow result on a busy machine says nothing about the code."""
    __tracebackhide__ = True
    if elapsed < bound:
        return
    factor = measure()
    if factor >= BUSY:
        pytest.skip(
            f"{what} took {elapsed:.2f} s, over its {bound:.2f} s, while the machine ran {factor:.1f} times "
            "slower than idle: too busy to judge. Run this test again on a quieter machine."
        )
    raise AssertionError(f"{what} took {elapsed:.2f} s, over its {bound:.2f} s (the machine is not busy)")
