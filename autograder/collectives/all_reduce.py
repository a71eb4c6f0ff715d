"""Exercises 2 to 4: all_reduce by parts, the ring's schedule, and the ring all_reduce."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from launcher import LaunchError

from ..checks import _short, expect_tensor, fail
from ..comm import CommLog
from .cases import Case, _describe_calls, _launch_cases, _name, _private_input, _ranks, _split_hint

# -- exercise 2 and the ring: all_reduce in place -----------------------------------------------


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
    fn: Callable,
    world_sizes: Sequence[int],
    sizes: Sequence[Any],
    dtypes: Sequence[torch.dtype],
    hint: Callable[[int, Case, LaunchError], str] = lambda p, case, err: "",
    outcomes: Callable[[list[torch.Tensor]], dict[str, list[torch.Tensor]]] = lambda inputs: {},
) -> Iterator[tuple[int, tuple, list[dict]]]:
    """Run ``fn(tensor)`` on every case at every world size, check that it all-reduced in place,
    and yield ``(world_size, shape, each rank's communication summary)`` for further checks.

    When a case fails on the ranks, ``hint(world_size, case, err)`` is added to the message;
    ``outcomes(inputs)`` maps typical mistakes to what each rank would then end with."""
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
            hint=lambda case, err, p=p: _split_hint(p, case[0]) + hint(p, case, err),
        )
        for i, case in enumerate(cases):
            per_rank = [results[rank][i] for rank in range(p)]
            _check_all_reduced(_describe_case(fn, p, case), p, case, per_rank, outcomes)
            yield p, case[0], [summary for *_, summary in per_rank]


def _check_all_reduced(
    what: str,
    p: int,
    case: Case,
    per_rank: list,
    outcomes: Callable[[list[torch.Tensor]], dict[str, list[torch.Tensor]]] = lambda inputs: {},
) -> None:
    __tracebackhide__ = True
    inputs = [given for given, *_ in per_rank]
    expected = torch.stack(inputs).sum(0)  # computed here, from the inputs
    mistaken = outcomes(inputs)
    for rank, (given, after, in_place, returned, _) in enumerate(per_rank):
        if not in_place:
            fail(f"{what}: work in place and return None; rank {rank} returned {returned}.")
        mistakes = {"leave the tensor unchanged": given, "count this rank's own data twice": expected + given}
        mistakes.update({mistake: ends[rank] for mistake, ends in mistaken.items()})
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
    for world_size, shape, ranks in _run_in_place(fn, world_sizes, sizes, dtypes, hint=_padding_hint):
        for rank, summary in enumerate(ranks):
            what = f"{_name(fn)} on {_ranks(world_size)}, {list(shape)} elements: rank {rank}"
            used = summary["collectives"]
            if used != {"reduce_scatter": 1, "all_gather": 1}:
                fail(
                    f"{what} called {_describe_calls(used)}; it should call reduce_scatter once and "
                    "all_gather once (and no all_reduce)."
                )
            # ceil(n / p) is the least that works; n // p + 1, as easy to write, is allowed too.
            most = math.prod(shape) // world_size + 1
            for name, numels in summary["calls"]:
                if min(numels) > most:
                    fail(
                        f"{what} passed {min(numels)} elements per rank to {name}; each rank's part "
                        f"is its chunk of the sum, at most n // p + 1 = {most} elements."
                    )


def _padding_hint(p: int, case: Case, err: LaunchError) -> str:
    """For a reduce_scatter_tensor or all_gather_into_tensor that Gloo refused for its sizes."""
    report = str(err)
    if math.prod(case[0]) % p == 0 or not ("worldSize" in report or "invalid tensor size" in report):
        return ""
    return (
        "\nreduce_scatter_tensor takes exactly p times as many elements as it gives each rank, and "
        "all_gather_into_tensor fills exactly that many: a tensor whose size p does not divide must be "
        "padded to a multiple of p first (with zeros, which do not change a sum)."
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
    runs = _run_in_place(fn, world_sizes, sizes, dtypes, hint=_receive_size_hint, outcomes=_ring_outcomes)
    for p, shape, ranks in runs:
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


def _receive_size_hint(p: int, case: Case, err: LaunchError) -> str:
    """For a message that did not fit its receive, when the chunks differ in size."""
    numel = math.prod(case[0])
    if numel % p == 0 or not re.search(
        r"received a message of \d+ bytes into a tensor of \d+ bytes", str(err)
    ):
        return ""
    return (
        "\nThe chunks differ in size here, so a receive buffer made like the chunk a rank sends can be the "
        "wrong size for the chunk that arrives: size it by the chunk received."
    )


def _ring_outcomes(inputs: list[torch.Tensor]) -> dict[str, list[torch.Tensor]]:
    """What each rank ends with after a ring all_reduce with one of some typical mistakes, run
    here on the ranks' inputs with the notebook's numbering: at step s of the reduce-scatter,
    rank r sends chunk r - s (so it finishes chunk r + 1), and at step s of the all-gather it
    sends chunk r + 1 - s."""
    p = len(inputs)

    def run(gather_from: int = 1, add_in_gather: bool = False, receive_into_chunk: bool = False) -> list:
        chunks = [list(x.reshape(-1).clone().tensor_split(p)) for x in inputs]
        for adding, offset in ((True, 0), (add_in_gather, gather_from)):
            for step in range(p - 1):
                sent = [chunks[r][(r + offset - step) % p].clone() for r in range(p)]
                for r in range(p):
                    chunk, arrived = chunks[r][(r + offset - step - 1) % p], sent[(r - 1) % p]
                    if adding and receive_into_chunk and offset == 0:
                        chunk.copy_(arrived + arrived)  # received into the chunk, then added to itself
                    elif adding:
                        chunk += arrived
                    else:
                        chunk.copy_(arrived)
        return [torch.cat(c).reshape(x.shape) for c, x in zip(chunks, inputs, strict=True)]

    return {
        "start the all-gather from a chunk this rank has not finished summing (chunk rank, not "
        "rank + 1)": run(gather_from=0),
        "add what arrives in the all-gather too (there a finished chunk replaces this rank's)": run(
            add_in_gather=True
        ),
        "receive into the chunk itself in the reduce-scatter and then add it to itself (this rank's own "
        "part is overwritten: receive into a buffer of its own)": run(receive_into_chunk=True),
    }
