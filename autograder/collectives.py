"""Checks for notebook 02 (collectives). Torch's own collectives are the reference every time.

Each check runs all its cases for one world size in a single `launch`, so a test cell takes a
fraction of a second per world size. When that launch fails, the cases run again one by one, so
that the message names the one that fails: the world size, the shape and the dtype. Every rank's
data is drawn inside the rank from a seed no other process knows, and the expected result is
computed here, in the checking process, from what each rank started with: a result can only be
right if the data really travelled between the ranks.
"""

from __future__ import annotations

import contextlib
import io
import math
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.distributed as dist

from launcher import LaunchError, get_device, launch

from .checks import _short, expect_close, expect_tensor, fail, private_generator
from .comm import CommLog

ROOTED = ("broadcast", "reduce", "gather", "scatter")
SPLITTING = ("scatter", "reduce_scatter", "all_to_all")
# torch 2.13 deprecated reduce_scatter_tensor (it warns) in favour of reduce_scatter_single, which
# older versions lack: use the new name where it exists.
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


def collective_inputs(
    name: str, world_size: int, seed: int | None = None, dtype: torch.dtype = torch.int64
) -> list[torch.Tensor]:
    """One input per rank. Without a seed, rank r holds [10r, 10r+1, ...], easy to follow by eye.

    Collectives that split a tensor into one chunk per rank get a multiple of world_size elements
    (2 per rank without a seed); with a seed, lengths and values are random.
    """
    if seed is None:
        length = 2 * world_size if name in SPLITTING else 4
        return [(torch.arange(length) + 10 * rank).to(dtype) for rank in range(world_size)]
    generator = torch.Generator().manual_seed(seed)
    per_rank = int(torch.randint(1, 4, (1,), generator=generator))
    length = (
        per_rank * world_size if name in SPLITTING else int(torch.randint(1, 7, (1,), generator=generator))
    )
    if dtype.is_floating_point:
        return [torch.randn(length, generator=generator).to(dtype) for _ in range(world_size)]
    return [torch.randint(0, 100, (length,), generator=generator).to(dtype) for _ in range(world_size)]


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
    # Without torch's checks that every rank calls the same collective: these calls are the
    # course's own, alike on every rank, and the checks would double their time.
    per_rank = _launch(_run_cases, world_size, cases, what="torch's collectives", check_collectives=False)
    return [[per_rank[rank][i] for rank in range(world_size)] for i in range(len(cases))]


# -- exercise 1: predicting what each collective leaves on every rank --------------------------


def check_predictions(
    predictions: dict[str, Callable[..., list[Any]]],
    world_sizes: Sequence[int] = (4,),
    seeds: Sequence[int | None] = (None,),
    dtypes: Sequence[torch.dtype] = (torch.int64,),
) -> None:
    """Check each ``predictions[name](inputs[, root])`` against torch's collective ``name``,
    on every rank, from every root, for each world size, seed and dtype (one launch per world
    size)."""
    __tracebackhide__ = True
    for world_size in world_sizes:
        cases = [
            (name, collective_inputs(name, world_size, seed, dtype), root)
            for name in predictions
            for seed in seeds
            for dtype in dtypes
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
    call = f"after_{name}({_short(inputs)}{f', {root}' if name in ROOTED else ''}) ({inputs[0].dtype})"
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


# -- running a check's cases on ranks -----------------------------------------------------------


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
    hint: Callable[[Any], str] = lambda case: "",
) -> list:
    """Run ``rank_fn(rank, world_size, fn, cases)`` on ``world_size`` ranks: each rank's list of
    results, one per case. If that fails, run the cases one at a time, and fail naming the first
    that fails on its own (``describe(case)``), with the launcher's report and ``hint(case)``."""
    __tracebackhide__ = True
    started = time.monotonic()
    try:
        return launch(rank_fn, world_size, fn, cases, backend="gloo", timeout=20)
    except LaunchError as err:
        together = str(err)
    # A failure reported at once (an exception, a deadlock the launcher proved) is cheap to find
    # again case by case; a hang that ran into the timeout is not, so it is reported as it is.
    quick = time.monotonic() - started < 8
    for case in cases if len(cases) > 1 and quick else []:
        try:
            launch(rank_fn, world_size, fn, [case], backend="gloo", timeout=20)
        except LaunchError as err:
            report = str(err)
        else:
            continue
        fail(f"{describe(case)} failed:\n{report}{hint(case)}")
    what = describe(cases[0]) if len(cases) == 1 else f"{_name(fn)} on {_ranks(world_size)}, case after case,"
    fail(f"{what} failed:\n{together}")


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
    return (
        f"\nHint: {_plural(numel, 'element')} do not split evenly among {world_size} ranks. "
        f"tensor.chunk({world_size}) gives {_plural(len(by_chunk), 'chunk')}, of {by_chunk} elements; "
        f"tensor.tensor_split({world_size}) always gives {world_size}, here of {by_split}."
    )


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


# -- exercise 2 and the ring: all_reduce in place -----------------------------------------------


Case = tuple[tuple, torch.dtype]  # a tensor's shape and dtype


def _private_input(shape: tuple, dtype: torch.dtype) -> torch.Tensor:
    """Whole numbers from a seed only this rank knows: sums of floats stay exact; integers too
    large for float32 to hold exactly, so an integer tensor sent through a float buffer comes
    back wrong."""
    bound = 50 if dtype.is_floating_point else 2**40
    return torch.randint(-bound, bound, shape, generator=private_generator()).to(dtype)


def _in_place_cases(rank: int, world_size: int, fn: Callable, cases: list[Case]) -> list:
    results = []
    for shape, dtype in cases:
        x = _private_input(shape, dtype)
        given = x.clone()
        with CommLog() as log:
            returned = fn(x)
        results.append((given, x, returned is None or returned is x, _short(returned), log.summary()))
    return results


def _cases(sizes: Sequence[Any], dtypes: Sequence[torch.dtype]) -> list[Case]:
    return [((size,) if isinstance(size, int) else tuple(size), dtype) for size in sizes for dtype in dtypes]


def _describe_case(fn: Callable, world_size: int, case: Case) -> str:
    shape, dtype = case
    return f"{_name(fn)} on {_ranks(world_size)}, a {dtype} tensor of shape {list(shape)}"


def _run_in_place(
    fn: Callable, world_sizes: Sequence[int], sizes: Sequence[Any], dtypes: Sequence[torch.dtype]
) -> Iterator[tuple[int, tuple, list[dict]]]:
    """Run ``fn(tensor)`` on every case at every world size, check that it all-reduced in place,
    and yield ``(world_size, shape, each rank's communication summary)`` for further checks."""
    __tracebackhide__ = True
    for p in world_sizes:
        # Tensors that split evenly first: when one that does not then fails, the hint about
        # splitting is to the point.
        cases = sorted(_cases(sizes, dtypes), key=lambda case, p=p: math.prod(case[0]) % p != 0)
        results = _launch_cases(
            _in_place_cases,
            p,
            fn,
            cases,
            describe=lambda case, p=p: _describe_case(fn, p, case),
            hint=lambda case, p=p: _split_hint(p, case[0]),
        )
        for i, case in enumerate(cases):
            per_rank = [results[rank][i] for rank in range(p)]
            _check_all_reduced(_describe_case(fn, p, case), p, case, per_rank)
            yield p, case[0], [summary for *_, summary in per_rank]


def _check_all_reduced(what: str, p: int, case: Case, per_rank: list) -> None:
    __tracebackhide__ = True
    expected = torch.stack([given for given, *_ in per_rank]).sum(0)  # computed here, from the inputs
    for rank, (given, after, in_place, returned, _) in enumerate(per_rank):
        if not in_place:
            fail(f"{what}: work in place and return None; rank {rank} returned {returned}.")
        mistakes = {"leave the tensor unchanged": given, "count this rank's own data twice": expected + given}
        try:
            expect_tensor(
                after,
                expected,
                f"{what}: rank {rank}'s tensor afterwards (the sum over ranks, in place)",
                mistakes=mistakes,
            )
        except AssertionError as err:
            message = str(err)
        else:
            continue
        fail(message + _split_hint(p, case[0]))


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
            what = f"{_name(fn)} on {_ranks(world_size)}, {list(shape)} elements: rank {rank}"
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


def _describe_calls(counts: dict[str, int]) -> str:
    if not counts:
        return "no collective"
    return ", ".join(
        f"{name} {count} time{'s' if count != 1 else ''}" for name, count in sorted(counts.items())
    )


# -- exercise 3: the ring's schedule --------------------------------------------------------------


def check_ring_chunks(
    fn: Callable[[int, int, int], tuple[int, int]], world_sizes: Sequence[int] = (2, 3, 4)
) -> None:
    """``fn(rank, step, world_size)`` -> (chunk sent right, chunk received from the left) at each
    of the 2(p-1) steps: the first p-1 add what arrives, the others copy it. Any schedule is
    accepted whose messages agree (each rank receives the chunk its left neighbour sends) and
    which leaves every rank with every chunk summed over all ranks, each rank's data once."""
    __tracebackhide__ = True
    for p in world_sizes:
        schedule = _schedule(fn, p)
        for step, row in enumerate(schedule):
            for rank, (_, received) in enumerate(row):
                left = (rank - 1) % p
                if received != row[left][0]:
                    fail(
                        f"{_name(fn)} on {p} ranks, step {step}: rank {rank} receives chunk {received}, but "
                        f"its left neighbour, rank {left}, sends chunk {row[left][0]}. A message carries "
                        "one chunk: both ends must agree on which."
                    )
        _check_ring_sums(_name(fn), p, schedule)


def _schedule(fn: Callable, p: int) -> list[list[tuple[int, int]]]:
    __tracebackhide__ = True
    schedule = []
    for step in range(2 * (p - 1)):
        row = []
        for rank in range(p):
            pair = fn(rank, step, p)
            if (
                type(pair) not in (tuple, list)
                or len(pair) != 2
                or any(type(c) is not int or not 0 <= c < p for c in pair)
            ):
                fail(
                    f"{_name(fn)}({rank}, {step}, {p}) returned {_short(pair)}; expected a tuple of two "
                    f"chunk numbers (ints from 0 to {p - 1}): the chunk rank {rank} sends, and the one it "
                    "receives."
                )
            row.append((pair[0], pair[1]))
        schedule.append(row)
    return schedule


def _check_ring_sums(name: str, p: int, schedule: list[list[tuple[int, int]]]) -> None:
    """Follow whose data each rank's copy of each chunk holds, step by step."""
    __tracebackhide__ = True
    held = [[Counter({q: 1}) for _ in range(p)] for q in range(p)]  # held[rank][chunk]: rank -> times
    for step, row in enumerate(schedule):
        adding = step < p - 1
        arriving = [((r + 1) % p, sent, Counter(held[r][sent])) for r, (sent, _) in enumerate(row)]
        for to, chunk, parts in arriving:
            held[to][chunk] = held[to][chunk] + parts if adding else parts
            twice = sorted(q for q, times in held[to][chunk].items() if times > 1)
            if twice:
                fail(
                    f"{name} on {p} ranks: after step {step}, rank {to}'s chunk {chunk} holds "
                    f"{_label(held[to][chunk])}: rank {twice[0]}'s data added twice. In the reduce-scatter "
                    "each chunk passes each rank once, collecting that rank's data."
                )
        if step == p - 2:
            complete = {c for r in range(p) for c in range(p) if len(held[r][c]) == p}
            if len(complete) < p:
                missing = min(set(range(p)) - complete)
                fail(
                    f"{name} on {p} ranks: after the reduce-scatter (steps 0 to {p - 2}), no rank holds "
                    f"chunk {missing} summed over all ranks (their copies hold "
                    f"{', '.join(_label(held[r][missing]) for r in range(p))}), so the all-gather cannot "
                    "hand it round."
                )
    for r in range(p):
        for c in range(p):
            if len(held[r][c]) < p:
                fail(
                    f"{name} on {p} ranks: at the end, rank {r}'s chunk {c} holds only "
                    f"{_label(held[r][c])}, not the sum over all ranks. In the all-gather, a rank passes on "
                    "only chunks that are complete."
                )


def _label(parts: Counter) -> str:
    return "+".join(str(q) for q in sorted(parts.elements()))


# -- exercise 4: ring all_reduce ----------------------------------------------------------------


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
            _check_ring_messages(f"{_name(fn)} on {p} ranks, {numel} elements", rank, p, numel, summary)


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


# -- exercise 5: broadcast down a binomial tree ------------------------------------------------


def _broadcast_cases(rank: int, world_size: int, fn: Callable, cases: list[tuple[int, Case]]) -> list:
    results = []
    for src, (shape, dtype) in cases:
        x = _private_input(shape, dtype)
        given = x.clone()
        with CommLog() as log:
            returned = fn(x, src)
        results.append((given, x, returned is None or returned is x, _short(returned), log.summary()))
    return results


def check_tree_broadcast(
    fn: Callable[[torch.Tensor, int], None],
    world_sizes: Sequence[int] = (4,),
    size: Any = 5,
    dtypes: Sequence[torch.dtype] = (torch.int64,),
) -> None:
    """``fn(tensor, src)`` must broadcast in place down a binomial tree, from every src.

    In ceil(log2 p) rounds the ranks that have the data send it on, so the source sends
    ceil(log2 p) messages, every other rank receives exactly one, and p-1 messages are sent in all.
    """
    __tracebackhide__ = True
    shape = (size,) if isinstance(size, int) else tuple(size)
    for p in world_sizes:
        cases = [(src, (shape, dtype)) for dtype in dtypes for src in range(p)]

        def describe(case: tuple[int, Case], p: int = p) -> str:
            src, (shape, dtype) = case
            return f"{_name(fn)}(tensor, src={src}) on {_ranks(p)}, a {dtype} tensor of shape {list(shape)}"

        results = _launch_cases(_broadcast_cases, p, fn, cases, describe=describe)
        rounds = math.ceil(math.log2(p)) if p > 1 else 0
        for i, case in enumerate(cases):
            src, what = case[0], describe(case)
            expected = results[src][i][0]  # what the source held before: known only to it, and to us
            summaries = []
            for rank in range(p):
                given, after, in_place, returned, summary = results[rank][i]
                if not in_place:
                    fail(f"{what}: work in place and return None; rank {rank} returned {returned}.")
                expect_tensor(
                    after,
                    expected,
                    f"{what}: rank {rank}'s tensor afterwards (the source's tensor)",
                    mistakes={"leave it unchanged": given},
                )
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


# -- exercise 6: the evaluation that hangs ---------------------------------------------------------


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

        results = _launch_cases(_evaluate_cases, p, fn, group, describe=describe)
        for i, lengths in enumerate(group):
            what = describe(lengths)
            shards = [results[rank][i][0] for rank in range(p)]
            everything = torch.cat(shards).double()
            expected = sample_losses(everything).mean().item()
            own_means = [sample_losses(s.double()).mean().item() for s in shards if len(s)]
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
                        "return this rank's own mean": sample_losses(shards[rank].double()).mean().item()
                        if len(shards[rank])
                        else math.nan,
                    },
                )
            calls = [results[rank][i][2] for rank in range(p)]
            if any(c != calls[0] for c in calls):
                listing = "; ".join(f"rank {r}: {_describe_calls(c)}" for r, c in enumerate(calls))
                fail(f"{what}: the ranks called different collectives ({listing}).")
