"""Exercise 6: the evaluation that hangs."""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Callable, Sequence

import torch

from launcher import LaunchError
from launcher.errors import ranks_label

from ..checks import expect_close, fail, private_generator
from ..comm import CommLog
from .cases import _describe_calls, _launch_cases, _name, _ranks

BATCH = 4  # the batch size of the notebook's evaluation


def sample_losses(batch: torch.Tensor) -> torch.Tensor:
    """The loss of each sample in the notebook's evaluation: (x - 1) squared."""
    return (batch - 1) ** 2


def _evaluate_cases(rank: int, world_size: int, fn: Callable, cases: list[list[int]]) -> list:
    results = []
    for lengths in cases:
        shard = torch.randn(lengths[rank], generator=private_generator())
        # What the evaluation prints (a running mean, say) is not checked: keep it out of the way.
        with CommLog() as log, contextlib.redirect_stdout(io.StringIO()):
            result = fn(rank, world_size, shard.clone())
        results.append((shard, result, log.summary()["collectives"]))
    return results


def check_evaluate(
    fn: Callable[[int, int, torch.Tensor], float], cases: Sequence[Sequence[int]] = ((13, 11, 12), (4, 9))
) -> None:
    """``fn(rank, world_size, shard)`` must return, on every rank, the mean of `sample_losses`
    over every sample of every rank. Each case gives the ranks' numbers of samples (its length is
    the world size); each rank's samples are drawn inside it, unknown to the others."""
    __tracebackhide__ = True
    by_size: dict[int, list[list[int]]] = {}
    for lengths in cases:
        by_size.setdefault(len(lengths), []).append(list(lengths))
    for p, group in by_size.items():

        def describe(lengths: list[int], p: int = p) -> str:
            return f"{_name(fn)} on {_ranks(p)} holding {', '.join(map(str, lengths))} samples"

        results = _launch_cases(_evaluate_cases, p, fn, group, describe=describe, hint=_hang_hint)
        for i, lengths in enumerate(group):
            what = describe(lengths)
            shards = [results[rank][i][0] for rank in range(p)]
            everything = torch.cat(shards).double()
            expected = sample_losses(everything).mean().item()
            own_means = [sample_losses(s.double()).mean().item() for s in shards if len(s)]
            fewest = min(len(s.split(BATCH)) for s in shards)  # an empty shard splits into one empty batch
            first_batches = torch.cat([s[: fewest * BATCH] for s in shards]).double()
            for rank in range(p):
                result = results[rank][i][1]
                expect_close(
                    result,
                    expected,
                    f"{what}: rank {rank}'s mean loss",
                    rel=1e-4,
                    mistakes={
                        "average each rank's own mean (ranks hold different numbers of samples)": sum(
                            own_means
                        )
                        / max(len(own_means), 1),
                        "average each rank's own mean, an empty rank's as 0 (ranks hold different numbers "
                        "of samples)": sum(own_means) / p,
                        "stop every rank after the fewest batches any rank has (the others' later samples "
                        "are left out)": sample_losses(first_batches).mean().item()
                        if len(first_batches)
                        else math.nan,
                        "return this rank's own mean": sample_losses(shards[rank].double()).mean().item()
                        if len(shards[rank])
                        else math.nan,
                    },
                )
            calls = [results[rank][i][2] for rank in range(p)]
            if any(c != calls[0] for c in calls):
                listing = "; ".join(f"rank {r}: {_describe_calls(c)}" for r, c in enumerate(calls))
                fail(f"{what}: the ranks called different collectives ({listing}).")


def _hang_hint(lengths: list[int], err: LaunchError) -> str:
    """For ranks that returned while others wait in a collective: what they had in common."""
    returned = set(getattr(err, "returned", ()))
    blocked_in = getattr(err, "blocked_in", {})
    waiting = sorted(set(range(len(lengths))) - returned)
    if not returned or not waiting or any(r not in blocked_in for r in waiting):
        return ""
    ops = {blocked_in[r] for r in waiting}
    where = ops.pop() if len(ops) == 1 else "torch.distributed"
    returned_ranks = sorted(returned)
    wait = "waits" if len(waiting) == 1 else "wait"
    if all(lengths[r] == 0 for r in returned_ranks):
        return (
            f"\nHint: {ranks_label(returned_ranks)} {'holds' if len(returned) == 1 else 'hold'} no samples "
            f"and returned while {ranks_label(waiting)} still {wait} in {where}: "
            "a rank with nothing to evaluate must still join every collective the others call."
        )
    batches = [-(-n // BATCH) for n in lengths]
    if max(batches[r] for r in returned_ranks) < min(batches[r] for r in waiting):
        return (
            f"\nHint: {ranks_label(returned_ranks)}, with fewer batches of {BATCH} "
            f"({', '.join(str(batches[r]) for r in returned_ranks)}), returned while {ranks_label(waiting)} "
            f"({', '.join(str(batches[r]) for r in waiting)}) still {wait} "
            f"in {where}: that is what you get if the ranks stop calling all_reduce when their own "
            "batches run out. Every rank must make the same collective calls: agree on the number of "
            "steps first."
        )
    return ""
