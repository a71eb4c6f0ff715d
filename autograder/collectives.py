"""Checks for notebook 02 (collectives). Torch's own collectives are the reference every time.

Each check runs all its cases for one world size in a single `launch`, so a test cell takes a
fraction of a second per world size, and reports the first case that goes wrong: the world
size, the inputs, the rank, and what that rank holds compared with what it should.
"""

from __future__ import annotations

import contextlib
import io
import math
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.distributed as dist

from launcher import get_device

from .checks import (
    _short,
    expect_matches_reference,
    expect_same_on_every_rank,
    expect_tensor,
    fail,
    run_ranks,
)
from .comm import CommLog

ROOTED = ("broadcast", "reduce", "gather", "scatter")
# torch 2.13 renamed reduce_scatter_tensor to reduce_scatter_single; older versions only have
# the first name, and the new one warns about neither.
_reduce_scatter_tensor = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
COLLECTIVES = (
    "broadcast",
    "reduce",
    "all_reduce",
    "gather",
    "all_gather",
    "scatter",
    "reduce_scatter",
    "all_to_all",
)


# -- what the real collectives do -------------------------------------------------------------


def collective_inputs(name: str, world_size: int, seed: int | None = None) -> list[torch.Tensor]:
    """One input per rank. Without a seed, rank r holds [10r, 10r+1, ...], easy to follow by eye.

    Collectives that split a tensor into one chunk per rank get 2 * world_size elements.
    """
    length = 2 * world_size if name in ("scatter", "reduce_scatter", "all_to_all") else 4
    if seed is None:
        return [torch.arange(length) + 10 * rank for rank in range(world_size)]
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 100, (length,), generator=generator) for _ in range(world_size)]


def run_collective(rank: int, world_size: int, name: str, inputs: list[torch.Tensor], root: int = 0) -> Any:
    """Inside a rank: run torch's collective on this rank's input; return what the rank holds.

    Ranks that receive nothing (all but the root of a reduce or a gather) return None. The
    tensors go on the rank's device, so this runs under NCCL as well as Gloo.
    """
    t = inputs[rank].to(get_device(), copy=True)
    n = world_size
    if name == "broadcast":
        dist.broadcast(t, src=root)
        return t
    if name == "reduce":
        dist.reduce(t, dst=root)
        return t if rank == root else None
    if name == "all_reduce":
        dist.all_reduce(t)
        return t
    if name == "gather":
        pieces = [torch.empty_like(t) for _ in range(n)] if rank == root else None
        dist.gather(t, pieces, dst=root)
        return torch.cat(pieces) if rank == root else None
    if name == "all_gather":
        pieces = [torch.empty_like(t) for _ in range(n)]
        dist.all_gather(pieces, t)
        return torch.cat(pieces)
    if name == "scatter":
        out = torch.empty(t.numel() // n, dtype=t.dtype, device=t.device)
        dist.scatter(out, list(t.chunk(n)) if rank == root else None, src=root)
        return out
    if name == "reduce_scatter":
        out = torch.empty(t.numel() // n, dtype=t.dtype, device=t.device)
        _reduce_scatter_tensor(out, t)
        return out
    if name == "all_to_all":
        out = torch.empty_like(t)
        dist.all_to_all_single(out, t)
        return out
    raise ValueError(f"unknown collective {name!r}; choose from {', '.join(COLLECTIVES)}")


def _run_cases(rank: int, world_size: int, cases: list[tuple[str, list[torch.Tensor], int]]) -> list[Any]:
    return [run_collective(rank, world_size, name, inputs, root) for name, inputs, root in cases]


def real_outputs(cases: list[tuple[str, list[torch.Tensor], int]], world_size: int) -> list[list[Any]]:
    """Run every (collective, inputs, root) case on ``world_size`` ranks: [case][rank] -> output."""
    per_rank = run_ranks(_run_cases, world_size, cases)
    return [[per_rank[rank][i] for rank in range(world_size)] for i in range(len(cases))]


# -- exercise 1: predicting what each collective leaves on every rank --------------------------


def check_predictions(
    predictions: dict[str, Callable[..., list[Any]]],
    world_sizes: Sequence[int] = (4,),
    seeds: Sequence[int | None] = (None,),
) -> None:
    """Check each ``predictions[name](inputs[, root])`` against torch's collective ``name``,
    on every rank, from every root, for each world size and seed (one launch per world size)."""
    __tracebackhide__ = True
    for world_size in world_sizes:
        cases = [
            (name, collective_inputs(name, world_size, seed), root)
            for name in predictions
            for seed in seeds
            for root in (range(world_size) if name in ROOTED else [0])
        ]
        for (name, inputs, root), real in zip(cases, real_outputs(cases, world_size), strict=True):
            with _no_launching(f"after_{name}"):
                _compare_prediction(name, predictions[name], inputs, root, real)


@contextlib.contextmanager
def _no_launching(name: str) -> Iterator[None]:
    """Predictions are tensor code: running the real collective inside one fails the check."""
    from launcher import call

    def refuse(*args: Any, **kwargs: Any) -> None:
        fail(f"{name} launched ranks; predict with tensor code alone, without torch.distributed.")

    real, call.Supervisor = call.Supervisor, refuse
    try:
        yield
    finally:
        call.Supervisor = real


def _compare_prediction(
    name: str, predict: Callable, inputs: list[torch.Tensor], root: int, real: list
) -> None:
    __tracebackhide__ = True
    world_size = len(inputs)
    call = f"after_{name}({_short(inputs)}{f', {root}' if name in ROOTED else ''})"
    predicted = predict(inputs, root) if name in ROOTED else predict(inputs)
    if not isinstance(predicted, (list, tuple)) or len(predicted) != world_size:
        fail(f"{call} should return a list with one entry per rank ({world_size}); got {_short(predicted)}.")
    for rank, (mine, theirs) in enumerate(zip(predicted, real, strict=True)):
        where = f"{call}, rank {rank}"
        if theirs is None:
            if mine is not None:
                fail(f"{where}: this rank receives nothing from {name}, so predict None; got {_short(mine)}.")
            continue
        expect_tensor(mine, theirs, where, mistakes=_prediction_mistakes(name, inputs, rank, root))


def _prediction_mistakes(
    name: str, inputs: list[torch.Tensor], rank: int, root: int
) -> dict[str, torch.Tensor]:
    n = len(inputs)
    total = torch.stack(inputs).sum(0)
    own = inputs[rank]
    if name == "reduce_scatter":
        return {
            "give every rank the whole sum (that is all_reduce)": total,
            "give rank r chunk r of its own input, without summing": own.chunk(n)[rank],
        }
    if name == "all_to_all":
        return {
            "leave each rank's input where it is": own,
            "give rank r chunk r of the sum (that is reduce_scatter)": total.chunk(n)[rank],
        }
    if name == "scatter":
        return {"split each rank's own input instead of the source's": own.chunk(n)[rank]}
    if name in ("gather", "all_gather"):
        return {"sum the inputs instead of putting them side by side": total}
    if name in ("all_reduce", "reduce"):
        return {"put the inputs side by side instead of summing": torch.cat(inputs)}
    return {}


# -- exercise 2: all_reduce from reduce_scatter and all_gather ---------------------------------


def _in_place_cases(rank: int, world_size: int, fn: Callable, cases: list[tuple[tuple, torch.dtype]]) -> list:
    results = []
    for shape, dtype in cases:
        x = _rank_input(rank, shape, dtype)
        expected = x.clone()
        dist.all_reduce(expected)
        with CommLog() as log:
            returned = fn(x)
        results.append((x, expected, returned, log.summary()))
    return results


def _rank_input(rank: int, shape: tuple, dtype: torch.dtype) -> torch.Tensor:
    """Whole numbers: sums of floats stay exact; integers too large for float32 to hold exactly,
    so an integer tensor sent through a float buffer comes back wrong."""
    generator = torch.Generator().manual_seed(1000 + rank)
    bound = 50 if dtype.is_floating_point else 2**40
    return torch.randint(-bound, bound, shape, generator=generator).to(dtype)


def _cases(sizes: Sequence[Any], dtypes: Sequence[torch.dtype]) -> list[tuple[tuple, torch.dtype]]:
    return [((size,) if isinstance(size, int) else tuple(size), dtype) for size in sizes for dtype in dtypes]


def _run_in_place(
    fn: Callable, world_sizes: Sequence[int], sizes: Sequence[Any], dtypes: Sequence[torch.dtype]
) -> Iterator[tuple[int, tuple, list[dict]]]:
    """Run ``fn(tensor)`` on every case at every world size, check that it all-reduced in place,
    and yield ``(world_size, shape, each rank's communication summary)`` for further checks."""
    __tracebackhide__ = True
    cases = _cases(sizes, dtypes)
    for world_size in world_sizes:
        results = run_ranks(_in_place_cases, world_size, fn, cases, what=_running(fn, cases))
        summaries = _check_in_place_results(fn.__name__, world_size, cases, results)
        for (shape, _), ranks in zip(cases, summaries, strict=True):
            yield world_size, shape, ranks


def _check_in_place_results(name: str, world_size: int, cases: list, results: list) -> list:
    """Check values (in place, nothing returned); return each case's communication summaries."""
    __tracebackhide__ = True
    summaries = []
    for (shape, dtype), per_rank in zip(cases, zip(*results, strict=True), strict=True):
        what = f"{name} on {world_size} ranks, a {dtype} tensor of shape {list(shape)}"
        for rank, (x, expected, returned, _) in enumerate(per_rank):
            expect_tensor(
                x, expected, f"{what}: rank {rank}'s tensor afterwards (the sum over ranks, in place)"
            )
            if returned is not None and returned is not x:
                fail(f"{what}: work in place and return None; the function returned {_short(returned)}.")
        summaries.append([summary for *_, summary in per_rank])
    return summaries


def check_all_reduce_by_parts(
    fn: Callable[[torch.Tensor], None],
    world_sizes: Sequence[int] = (2, 4),
    sizes: Sequence[Any] = (8, 10),
    dtypes: Sequence[torch.dtype] = (torch.float32,),
) -> None:
    """``fn(tensor)`` must all-reduce in place with one reduce_scatter and one all_gather."""
    __tracebackhide__ = True
    for world_size, shape, ranks in _run_in_place(fn, world_sizes, sizes, dtypes):
        for rank, summary in enumerate(ranks):
            what = f"{fn.__name__} on {world_size} ranks, {list(shape)} elements: rank {rank}"
            used = summary["collectives"]
            if used != {"reduce_scatter": 1, "all_gather": 1}:
                fail(
                    f"{what} called {_describe_calls(used)}; it should call reduce_scatter once and "
                    "all_gather once (and no all_reduce)."
                )
            chunk = -(-math.prod(shape) // world_size)
            for name, numels in summary["calls"]:
                if min(numels) > chunk:
                    fail(
                        f"{what} passed {min(numels)} elements per rank to {name}; each rank's part "
                        f"is its chunk of the sum, about n / p = {chunk} elements."
                    )


def _running(fn: Callable, cases: list[tuple[tuple, torch.dtype]]) -> str:
    shapes = ", ".join(f"{list(shape)} {str(dtype).removeprefix('torch.')}" for shape, dtype in cases)
    return f"{fn.__name__} on tensors of shape {shapes}"


def _describe_calls(counts: dict[str, int]) -> str:
    if not counts:
        return "no collective"
    return ", ".join(
        f"{name} {count} time{'s' if count != 1 else ''}" for name, count in sorted(counts.items())
    )


# -- exercise 3: ring all_reduce ----------------------------------------------------------------


def check_ring_all_reduce(
    fn: Callable[[torch.Tensor], None],
    world_sizes: Sequence[int] = (2, 3, 4),
    sizes: Sequence[Any] = (12, 10),
    dtypes: Sequence[torch.dtype] = (torch.float32,),
) -> None:
    """``fn(tensor)`` must all-reduce in place, only with sends and receives around a ring.

    Each rank sends 2(p-1) chunks to one neighbour and receives 2(p-1) from the other, so it
    sends 2(p-1)/p of the tensor in all (exactly, when p divides its size).
    """
    __tracebackhide__ = True
    for p, shape, ranks in _run_in_place(fn, world_sizes, sizes, dtypes):
        numel = math.prod(shape)
        for rank, summary in enumerate(ranks):
            _check_ring_messages(f"{fn.__name__} on {p} ranks, {numel} elements", rank, p, numel, summary)


def _check_ring_messages(what: str, rank: int, p: int, numel: int, summary: dict) -> None:
    __tracebackhide__ = True
    if summary["collectives"]:
        fail(
            f"{what}: rank {rank} called {_describe_calls(summary['collectives'])}; "
            "use only sends and receives."
        )
    sends, recvs = summary["sends"], summary["recvs"]
    steps = 2 * (p - 1)
    if len(sends) != steps or len(recvs) != steps:
        fail(
            f"{what}: rank {rank} sent {len(sends)} and received {len(recvs)} messages; a ring all_reduce "
            f"takes 2(p-1) = {steps} steps, with one send and one receive each."
        )
    if p == 1:
        return
    send_peers, recv_peers = {peer for peer, _ in sends}, {peer for peer, _ in recvs}
    if None in recv_peers:
        fail(
            f"{what}: rank {rank} received without saying from whom; pass src= (its left neighbour) to recv."
        )
    neighbours = {(rank + 1) % p, (rank - 1) % p}
    if len(send_peers) != 1 or len(recv_peers) != 1 or not (send_peers | recv_peers) <= neighbours:
        fail(
            f"{what}: rank {rank} sent to ranks {sorted(send_peers)} and received from ranks "
            f"{sorted(recv_peers)}; "
            "in a ring it sends to one neighbour and receives from the other."
        )
    sent = sum(count for _, count in sends)
    low, high = steps * (numel // p), steps * -(-numel // p)
    if not low <= sent <= high:
        fail(
            f"{what}: rank {rank} sent {sent} elements in all; a ring sends 2(p-1)/p of the tensor, "
            f"{steps} chunks of about {numel}/{p} elements ({low} to {high} elements)."
        )


# -- exercise 4: broadcast down a binomial tree ------------------------------------------------


def _broadcast_cases(rank: int, world_size: int, fn: Callable, size: int) -> list:
    results = []
    for src in range(world_size):
        x = torch.full((size,), 100 * (rank + 1))  # rank r holds 100(r+1) everywhere
        with CommLog() as log:
            returned = fn(x, src)
        results.append((x, returned, log.summary()))
    return results


def check_tree_broadcast(
    fn: Callable[[torch.Tensor, int], None], world_sizes: Sequence[int] = (4,), size: int = 5
) -> None:
    """``fn(tensor, src)`` must broadcast in place down a binomial tree, from every src.

    In ceil(log2 p) rounds the ranks that have the data send it on, so the source sends
    ceil(log2 p) messages, every other rank receives exactly one, and p-1 messages are sent in all.
    """
    __tracebackhide__ = True
    for p in world_sizes:
        results = run_ranks(_broadcast_cases, p, fn, size, what=f"{fn.__name__}, from every src in turn,")
        rounds = math.ceil(math.log2(p)) if p > 1 else 0
        for src in range(p):
            what = f"{fn.__name__}(tensor, src={src}) on {p} ranks"
            expected = torch.full((size,), 100 * (src + 1))
            summaries = []
            for rank in range(p):
                x, returned, summary = results[rank][src]
                expect_tensor(x, expected, f"{what}: rank {rank}'s tensor afterwards")
                if returned is not None and returned is not x:
                    fail(f"{what}: work in place and return None; it returned {_short(returned)}.")
                if summary["collectives"]:
                    fail(
                        f"{what}: rank {rank} called {_describe_calls(summary['collectives'])}; "
                        "use sends and receives."
                    )
                summaries.append(summary)
            _check_tree_messages(what, src, p, rounds, summaries)


def _check_tree_messages(what: str, src: int, p: int, rounds: int, summaries: list[dict]) -> None:
    __tracebackhide__ = True
    for rank, summary in enumerate(summaries):
        received = len(summary["recvs"])
        if rank != src and received != 1:
            fail(
                f"{what}: rank {rank} received {received} messages; every rank but the source "
                "receives exactly one."
            )
        if rank == src and received:
            fail(f"{what}: the source, rank {src}, received {received} messages; it already has the data.")
    src_sends = len(summaries[src]["sends"])
    if src_sends != rounds:
        fail(
            f"{what}: the source sent {src_sends} messages; in a binomial tree it sends one per round, "
            f"ceil(log2 {p}) = {rounds}. (Sending to every rank in turn takes p-1 = {p - 1} rounds.)"
        )
    total = sum(len(s["sends"]) for s in summaries)
    if total != p - 1:
        fail(f"{what}: {total} messages were sent in all; a broadcast needs exactly p-1 = {p - 1}.")
    # Each rank sends one message per round, from the round after it received the data.
    arrives = {src: 0}
    waiting = [src]
    while waiting:
        sender = waiting.pop(0)
        for i, (peer, _) in enumerate(summaries[sender]["sends"]):
            if peer not in arrives:
                arrives[peer] = arrives[sender] + i + 1
                waiting.append(peer)
    last = max(arrives.values())
    if last > rounds:
        fail(
            f"{what}: the data reaches the last rank in round {last}; a binomial tree reaches every "
            f"rank in ceil(log2 {p}) = {rounds} rounds: in each round, every rank that has the data "
            "sends it to one that does not."
        )


# -- exercise 5: the deadlock, fixed -------------------------------------------------------------


def _step_with_log(rank: int, world_size: int, fn: Callable) -> tuple[Any, dict, str]:
    printed = io.StringIO()
    with CommLog() as log, contextlib.redirect_stdout(printed):
        result = fn(rank, world_size)
    return result, log.summary(), printed.getvalue()


def check_fixed_step(
    fn: Callable[[int, int], torch.Tensor],
    expected: Callable[[int], torch.Tensor],
    expected_log: Callable[[int], float],
    world_sizes: Sequence[int] = (2, 3, 4),
) -> None:
    """``fn(rank, world_size)`` must finish and return ``expected(world_size)`` on every rank;
    every rank must call the same collectives, a broadcast among them; and rank 0, only, must
    print ``expected_log(world_size)``."""
    __tracebackhide__ = True
    for p in world_sizes:
        name = f"{fn.__name__} on {p} ranks"
        results = run_ranks(_step_with_log, p, fn, timeout=10, what=fn.__name__)
        returned = [result for result, _, _ in results]
        expect_same_on_every_rank(returned, name)
        expect_matches_reference(returned, expected(p), name)
        calls = [summary["collectives"] for _, summary, _ in results]
        if any(c != calls[0] for c in calls):
            listing = "; ".join(f"rank {r}: {_describe_calls(c)}" for r, c in enumerate(calls))
            fail(f"{name}: the ranks called different collectives ({listing}).")
        if not calls[0].get("broadcast"):
            fail(f"{name}: no broadcast; the learning rate must come from rank 0.")
        _check_log(name, expected_log(p), [printed for _, _, printed in results])


def _check_log(name: str, expected: float, printed: list[str]) -> None:
    __tracebackhide__ = True
    numbers = [float(x) for x in re.findall(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?", printed[0])]
    if not any(math.isclose(x, expected, rel_tol=1e-4) for x in numbers):
        fail(
            f"{name}: rank 0 should print the mean squared gradient norm, {expected:g}; "
            f"it printed {printed[0]!r}."
        )
    for rank, text in enumerate(printed[1:], start=1):
        if text.strip():
            fail(f"{name}: only rank 0 should print; rank {rank} printed {text!r}.")
