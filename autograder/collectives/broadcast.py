"""Exercise 5: broadcast down a binomial tree."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..checks import _short, expect_tensor, fail
from ..comm import CommLog
from .cases import Case, _describe_calls, _launch_cases, _name, _private_input, _ranks

_equal = torch.equal  # captured at import


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
            mistakes = {}
            rank_zero = results[0][i][0]
            if src != 0 and all(_holds(results[rank][i][1], rank_zero) for rank in range(p)):
                mistakes["broadcast from rank 0 whatever src is (number the ranks from src)"] = rank_zero
            summaries = []
            for rank in range(p):
                given, after, in_place, returned, summary = results[rank][i]
                if not in_place:
                    fail(f"{what}: work in place and return None; rank {rank} returned {returned}.")
                expect_tensor(
                    after,
                    expected,
                    f"{what}: rank {rank}'s tensor afterwards (the source's tensor)",
                    mistakes={**mistakes, "leave it unchanged": given},
                )
                if summary["collectives"]:
                    fail(
                        f"{what}: rank {rank} called {_describe_calls(summary['collectives'])}; "
                        "use sends and receives."
                    )
                summaries.append(summary)
            _check_tree_messages(what, src, p, rounds, summaries)


def _holds(tensor: Any, value: torch.Tensor) -> bool:
    """Whether ``tensor`` is a plain tensor equal to ``value``."""
    return (
        type(tensor) is torch.Tensor
        and (tensor.shape, tensor.dtype) == (value.shape, value.dtype)
        and _equal(tensor, value)
    )


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
