"""Running a check's cases on ranks, and the helpers the checks share.

Each check runs all its cases for one world size in a single `launch`; when that launch fails,
`_launch_cases` runs the cases again one by one, so that the message names the one that fails.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import torch

from launcher import LaunchError, launch

from ..checks import fail, private_generator


def _launch(
    rank_fn: Callable,
    world_size: int,
    *args: Any,
    what: str,
    timeout: float = 20,
    check_collectives: bool,
) -> list:
    """`launch` on Gloo for a check; a failure becomes a message that keeps the launcher's report."""
    __tracebackhide__ = True
    try:
        return launch(
            rank_fn, world_size, *args, backend="gloo", timeout=timeout, check_collectives=check_collectives
        )
    except LaunchError as err:
        report = str(err)
    fail(f"{what} on {_ranks(world_size)} failed:\n{report}")


def _launch_cases(
    rank_fn: Callable,
    world_size: int,
    fn: Callable,
    cases: list,
    describe: Callable[[Any], str],
    hint: Callable[[Any, LaunchError], str] = lambda case, err: "",
) -> list:
    """Run ``rank_fn(rank, world_size, fn, cases)`` on ``world_size`` ranks: each rank's list of
    results, one per case. If that fails, run the cases one at a time, and fail naming the first
    that fails on its own (``describe(case)``), with the launcher's report and ``hint(case, err)``
    (``err`` the LaunchError, or LaunchHang, that case raised)."""
    __tracebackhide__ = True
    started = time.monotonic()
    try:
        return launch(rank_fn, world_size, fn, cases, backend="gloo", timeout=20)
    except LaunchError as err:
        together, together_err = str(err), err
    # A failure reported at once (an exception, a deadlock the launcher proved) is cheap to find
    # again case by case; a hang that ran into the timeout is not, so it is reported as it is.
    quick = time.monotonic() - started < 8
    for case in cases if len(cases) > 1 and quick else []:
        try:
            launch(rank_fn, world_size, fn, [case], backend="gloo", timeout=20)
        except LaunchError as err:
            report, failed = str(err), err
        else:
            continue
        fail(f"{describe(case)} failed:\n{report}{hint(case, failed)}")
    if len(cases) == 1:
        fail(f"{describe(cases[0])} failed:\n{together}{hint(cases[0], together_err)}")
    fail(f"{_name(fn)} on {_ranks(world_size)}, case after case, failed:\n{together}")


def _ranks(world_size: int) -> str:
    return f"{world_size} rank{'s' if world_size != 1 else ''}"


def _name(fn: Callable) -> str:
    return getattr(fn, "__name__", "your function")


def _split_hint(world_size: int, shape: tuple) -> str:
    """For a tensor that does not split evenly among the ranks: what chunk and tensor_split do."""
    numel = math.prod(shape)
    if world_size < 2 or numel % world_size == 0:
        return ""
    by_chunk = [c.numel() for c in torch.empty(numel).chunk(world_size)]
    by_split = [c.numel() for c in torch.empty(numel).tensor_split(world_size)]
    fewer = (
        f" (fewer than {world_size}: code that cuts with chunk finds no chunk at some indices)"
        if len(by_chunk) < world_size
        else ""
    )
    return (
        f"\nHint: {_plural(numel, 'element')} {'does' if numel == 1 else 'do'} not split evenly among "
        f"{world_size} ranks. tensor.chunk({world_size}) gives {_plural(len(by_chunk), 'chunk')}, of "
        f"{by_chunk} elements{fewer}; tensor.tensor_split({world_size}) always gives {world_size}, "
        f"here of {by_split}."
    )


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


Case = tuple[tuple, torch.dtype]  # a tensor's shape and dtype


def _private_input(shape: tuple, dtype: torch.dtype) -> torch.Tensor:
    """Whole numbers from a seed only this rank knows: sums of floats stay exact; integers too
    large for float32 to hold exactly, so an integer tensor sent through a float buffer comes
    back wrong."""
    bound = 50 if dtype.is_floating_point else 2**40
    return torch.randint(-bound, bound, shape, generator=private_generator()).to(dtype)


def _describe_calls(counts: dict[str, int]) -> str:
    if not counts:
        return "no collective"
    return ", ".join(
        f"{name} {count} time{'s' if count != 1 else ''}" for name, count in sorted(counts.items())
    )
