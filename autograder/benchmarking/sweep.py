"""Checks of a sweep over message sizes: one launch, every size timed by every rank inside the
ranks, without the launcher's collective checks, and each size's busbw counted right.

The test's timer stands in for a real one: it takes ``alpha + bytes / beta`` seconds, and, as a
real timer does, it is a collective, which every rank must call for the same size at once.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.distributed as dist

import launcher
from launcher import LaunchError

from ..checks import CheckFailed, fail, plain_number


class SteadyTimer:
    """A stand-in for timing a collective inside a rank, as ``timer(rank, world_size, name,
    size_bytes)``: the array of ``world_size * chunk`` float32 elements that ``size_bytes`` makes
    takes ``alpha + bytes / beta`` seconds per call, on every rank."""

    def __init__(self, alpha: float = 5e-5, beta: float = 2e9) -> None:
        self.alpha, self.beta = alpha, beta

    def seconds(self, world_size: int, size: int) -> float:
        return self.alpha + 4 * world_size * (size // (4 * world_size)) / self.beta

    def __call__(self, rank: int, world_size: int, name: str, size: int) -> float:
        if launcher.rank.current_context() is None:
            raise CheckFailed(
                "sweep called the timer outside the ranks: call it inside the function you launch."
            )
        if dist.get_debug_level() == dist.DebugLevel.DETAIL:
            raise CheckFailed(
                "sweep launched the ranks with the launcher's collective checks on. They add an exchange "
                "before every collective, which a benchmark would time with it (it makes a small all_reduce "
                "several times slower): launch with check_collectives=False."
            )
        # Like a real timer, line up with the other ranks: every rank times the same size at once.
        mine = torch.tensor([size], dtype=torch.int64, device=launcher.get_device())
        sizes = [torch.zeros_like(mine) for _ in range(world_size)]
        dist.all_gather(sizes, mine)
        others = [int(s.item()) for s in sizes]
        if len(set(others)) > 1:
            raise CheckFailed(
                f"the ranks called the timer for different sizes at once: {others} bytes (rank by rank). "
                "Every rank must time every size, in the same order."
            )
        return self.seconds(world_size, size)


def _number(value: Any) -> float | None:
    number = plain_number(value)
    return None if number is None else float(number)


def check_sweep(
    sweep: Callable,
    bandwidths: Callable,
    input_elements: Callable[[str, int, int], int],
    names: Sequence[str],
    sizes: Sequence[int],
    world_sizes: Sequence[int] = (4,),
) -> None:
    """Check ``sweep(name, sizes, world_size, timer)``: one launch, each size timed in the ranks,
    and for each size ``(seconds, busbw)`` with busbw from the student's own ``bandwidths`` (so
    that a mistake there is not counted twice) given ``input_elements(name, world_size, chunk)``."""
    __tracebackhide__ = True
    timer = SteadyTimer()
    for world_size in world_sizes:
        for name in names:
            what = f"sweep({name!r}, {list(sizes)}, world_size={world_size}, timer)"
            result = _run_sweep(what, sweep, name, list(sizes), world_size, timer)
            if type(result) not in (list, tuple) or len(result) != len(sizes):
                fail(
                    f"{what} returned {result!r:.200}; expected a list with one (seconds, busbw) "
                    "pair per size."
                )
            for size, pair in zip(sizes, result, strict=True):
                numbers = [_number(x) for x in pair] if type(pair) in (list, tuple) else []
                if len(numbers) != 2 or None in numbers:
                    fail(f"{what}: for {size} bytes it returned {pair!r:.200}; expected a pair of numbers.")
                _check_pair(what, name, size, world_size, numbers, timer, bandwidths, input_elements)


def _run_sweep(what: str, sweep: Callable, name: str, sizes: list[int], world_size: int, timer: Any) -> Any:
    __tracebackhide__ = True
    try:
        with _counting_launches() as launches:
            result = sweep(name, sizes, world_size, timer)
    except LaunchError as err:  # LaunchHang too
        failures = getattr(err, "failures", None) or []
        reasons = [f.exception for f in failures if isinstance(getattr(f, "exception", None), CheckFailed)]
        if reasons:
            fail(f"{what}: {reasons[0]}")
        fail(
            f"{what} failed. The timer is itself a collective, as a real one is (it lines the ranks up and "
            "takes the slowest rank's time): every rank must call it, for every size, in the same order. "
            f"The launcher's report:\n{err}"
        )
    if len(launches) != 1:
        fail(
            f"{what} launched ranks {len(launches)} times. Launch once and loop over the sizes inside the "
            "ranks: every launch starts and connects the ranks anew."
        )
    return result


def _check_pair(
    what: str,
    name: str,
    size: int,
    world_size: int,
    pair: list[float],
    timer: SteadyTimer,
    bandwidths: Callable,
    input_elements: Callable,
) -> None:
    __tracebackhide__ = True
    chunk = size // (4 * world_size)
    seconds = timer.seconds(world_size, size)
    if not math.isclose(pair[0], seconds, rel_tol=1e-9):
        fail(
            f"{what}: seconds per call for {size} bytes: expected {seconds:.6g} (what the timer said), "
            f"got {pair[0]:.6g}."
        )
    count = input_elements(name, world_size, chunk)

    def busbw(elements: int, which: int = 1) -> float:
        return float(bandwidths(name, elements, torch.float32, seconds, world_size)[which])

    expected = busbw(count)
    if math.isclose(pair[1], expected, rel_tol=1e-9, abs_tol=1e-12):
        return
    message = (
        f"{what}: busbw for {size} bytes: expected {expected:.6g} GB/s (your bandwidths() of the "
        f"{count}-element input each rank passes to {name}, at {seconds:.6g} s), got {pair[1]:.6g}."
    )
    mistakes = {
        "return algbw, the first of what bandwidths() returns, not busbw": busbw(count, 0),
        "pass bandwidths() the size in bytes, not in elements": busbw(size),
        "pass bandwidths() the whole array's elements, where each rank's input is one share of it": busbw(
            world_size * chunk
        ),
    }
    for mistake, value in mistakes.items():
        if value != expected and math.isclose(pair[1], value, rel_tol=1e-9):
            message += f" That is what you get if you {mistake}."
            break
    fail(message)


@contextlib.contextmanager
def _counting_launches() -> Iterator[list[int]]:
    """Counts the launches made inside it (each one supervises its own ranks)."""
    from launcher import call

    launches: list[int] = []
    real = call.Supervisor

    def counting(*args: Any, **kwargs: Any) -> Any:
        launches.append(1)
        return real(*args, **kwargs)

    call.Supervisor = counting
    try:
        yield launches
    finally:
        call.Supervisor = real
