"""Running a function on ranks for a test, and comparing what the ranks returned."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from launcher import LaunchError, LaunchHang, launch
from launcher.hangs import POINT_TO_POINT, SLOW_NOT_STUCK

from .expect import expect_equal, expect_tensor, fail

RECHECK_S = 8.0  # the longest a failed run's second run, with the collectives checked, may take


def fresh_seed() -> int:
    """A seed no notebook can know in advance: each check draws its own."""
    return int.from_bytes(os.urandom(6), "little")


def private_generator() -> torch.Generator:
    """A generator, in a rank, whose numbers no other process can reproduce."""
    return torch.Generator().manual_seed(fresh_seed())


def run_ranks(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    timeout: float = 20,
    what: str = "",
    diagnoses: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> list:
    """`launch` for tests: a failure becomes a CheckFailed that keeps the launcher's report.

    Tests run on Gloo, on the CPU, wherever they run, so that a test means the same with or
    without GPUs. ``what`` says what was being run, for the message (default: the function's name).
    ``diagnoses`` maps words a failure's report may contain (an error torch raises for a known
    mistake) to what that mistake is; the first found is said before the report.

    Torch's check that every rank calls the same collective (`launch`'s ``check_collectives``)
    makes each collective several times slower on Gloo, and a right answer never needs it. So,
    unless the caller chooses, the ranks run without it, and only if that fails in a way a
    mismatched collective could cause (a hang, a rank that died, an error from torch.distributed),
    again with it: the mismatch is then named, rather than seen as a hang or a size Gloo refused.
    (The second run may take at most RECHECK_S; if it only hangs, the first run's report stands.)
    """
    __tracebackhide__ = True
    chosen = "check_collectives" in kwargs
    kwargs.setdefault("check_collectives", False)
    try:
        return launch(fn, world_size, *args, backend="gloo", timeout=timeout, **kwargs)
    except LaunchError as err:
        report = _for_a_check(str(err), timeout)
        again = not chosen and _may_be_a_mismatch(err)
    if again:
        try:
            kwargs["check_collectives"] = True
            launch(fn, world_size, *args, backend="gloo", timeout=min(timeout, RECHECK_S), **kwargs)
        except LaunchHang:
            pass
        except LaunchError as err:
            report = _for_a_check(str(err), timeout)
    # Failing here, outside the except block, shows the launcher's report once: inside it,
    # Python would print the LaunchError too, "during handling" of which this one happened.
    ranks = f"{world_size} rank{'s' if world_size != 1 else ''}"
    diagnosis = next((f" {said}" for words, said in (diagnoses or {}).items() if words in report), "")
    fail(f"{what or getattr(fn, '__name__', 'the function')} on {ranks} failed:{diagnosis}\n{report}")


# What torch.distributed raises when an exchange breaks (a peer gone, a size Gloo refused, its own
# timeout): a collective the ranks called differently may be the cause.
EXCHANGE_ERRORS = {"RuntimeError", "DistError", "DistBackendError", "DistNetworkError", "DistStoreError"}


def _may_be_a_mismatch(err: LaunchError) -> bool:
    """Whether running again with torch's collective check could say more. Not when every rank
    that failed raised an ordinary Python error of its own (a NotImplementedError, a failed
    check, a TypeError), which the report already shows where it was raised; nor when every rank
    still running waits in a send or a receive, which that check does not look at."""
    if isinstance(err, LaunchHang):
        waiting = set(err.stacks) - set(err.returned)
        return not (
            waiting and set(err.blocked_in) == waiting and set(err.blocked_in.values()) <= POINT_TO_POINT
        )
    if not err.failures:
        return True
    return any(not f.type_name or f.type_name in EXCHANGE_ERRORS for f in err.failures)


def _for_a_check(report: str, timeout: float) -> str:
    """The launcher's report, with its advice to pass a larger timeout (which a student cannot give
    a check) replaced by what a check's timeout means."""
    if SLOW_NOT_STUCK not in report:
        return report
    return (
        report[: report.index(SLOW_NOT_STUCK)].rstrip()
        + f"\n\nA correct answer finishes well within the {timeout:g} seconds this check allows, so some "
        "rank waits for something that never comes: a message never sent, or one sent with isend whose "
        "Work was dropped before it completed (keep each one and wait() on it)."
    )


def expect_same_on_every_rank(results: Sequence[Any], what: str) -> None:
    """Check that every rank returned the same tensor (or value) as rank 0."""
    __tracebackhide__ = True
    for rank, result in enumerate(results[1:], start=1):
        if isinstance(results[0], torch.Tensor):
            expect_tensor(result, results[0], f"{what}: rank {rank} differs from rank 0, which")
        else:
            expect_equal(result, results[0], f"{what}: rank {rank} differs from rank 0, which")


def expect_matches_reference(results: Sequence[Any], reference: torch.Tensor, what: str) -> None:
    """Check every rank's tensor against a reference computed in a single process."""
    __tracebackhide__ = True
    for rank, result in enumerate(results):
        expect_tensor(result, reference, f"{what}: rank {rank} (against the single-process reference)")
