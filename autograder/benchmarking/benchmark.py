"""Checks of a benchmark: what it does, in order, and what it returns, never how fast anything ran.

Inside each rank, a fake clock with known readings (starting at an odd time of its own, as a real
clock does, so that a timestamp kept in float32 shows), a recording ``synchronize`` and a stand-in
GPU behind ``get_device()`` (`standin`) write one timeline, which the check then reads. The rank
whose clock says it was slowest is also late to whatever follows the timed calls, so that a result
read before a collective has finished differs from the one read after.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist

from ..checks import counted, describe_event, fail, plain_number, run_ranks
from .recording import VIEWS_AND_COPIES, DeviceTimeline, is_collective, off_the_gpu
from .standin import gpu_rank

# What each rank's clock says the timed calls took, in seconds: rank 0 is never the slowest.
RANK_SECONDS = (0.30, 0.55, 0.20, 0.45)
# Where each rank's clock starts: far from zero, and from round numbers, like a real clock's.
FIRST_READING = 123_456.789_012
LATE_BY = 0.05  # seconds the slowest rank takes over its second reading


def _reading(rank: int) -> float:
    return FIRST_READING + 17.317 * rank


def _benchmark_on_rank(
    rank: int, world_size: int, benchmark: Callable, warmup: int, iterations: int
) -> tuple:
    start = _reading(rank)
    readings = [start, start + RANK_SECONDS[rank % len(RANK_SECONDS)]]
    slowest = max(range(world_size), key=lambda r: RANK_SECONDS[r % len(RANK_SECONDS)])
    timeline: DeviceTimeline

    def clock() -> float:
        n = sum(event[0] == "clock" for event in timeline.recorded())
        timeline.add(("clock",))
        if n == 1 and rank == slowest and world_size > 1:
            time.sleep(LATE_BY)
        return readings[n] if n < len(readings) else readings[-1] + 1e-6 * (n - 1)

    def synchronize() -> None:
        timeline.add(("sync",))

    with gpu_rank(rank, world_size, synchronize) as gpu:
        timeline = DeviceTimeline(gpu)
        data = torch.arange(1000, dtype=torch.float32, device="cuda")  # on the stand-in GPU

        def run() -> None:
            dist.broadcast(data, src=0)

        with timeline:
            result = benchmark(
                run, warmup=warmup, iterations=iterations, clock=clock, synchronize=synchronize
            )
    number = plain_number(result)
    return (number if number is not None else repr(result)[:200]), list(timeline.recorded())


def check_benchmark(
    benchmark: Callable, world_sizes: Sequence[int] = (2,), warmup: int = 2, iterations: int = 10
) -> None:
    """Check ``benchmark(run, warmup=, iterations=, clock=, synchronize=)`` on every rank: the order
    of what it does, and that every rank returns the slowest rank's seconds per call."""
    __tracebackhide__ = True
    for world_size in world_sizes:
        # Without the launcher's collective checks: they add a blocking exchange before every
        # collective, which would wait for a late rank where the benchmark itself does not.
        per_rank = run_ranks(
            _benchmark_on_rank,
            world_size,
            benchmark,
            warmup,
            iterations,
            what="benchmark",
            check_collectives=False,
        )
        what = f"benchmark(run, warmup={warmup}, iterations={iterations}) on {counted(world_size, 'rank')}"
        for rank, (_, events) in enumerate(per_rank):
            _check_order(f"{what}, rank {rank}", events, warmup, iterations)
        _check_results(what, [result for result, _ in per_rank], iterations)


def _check_results(what: str, results: list, iterations: int) -> None:
    """Every rank must return the slowest rank's seconds per call; name the usual wrong answers."""
    __tracebackhide__ = True
    for rank, result in enumerate(results):
        if type(result) is str:
            fail(f"{what}: rank {rank} returned {result}; return the seconds per call, a number.")
    n = len(results)
    seconds = [RANK_SECONDS[r % len(RANK_SECONDS)] for r in range(n)]
    per_call = [((_reading(r) + seconds[r]) - _reading(r)) / iterations for r in range(n)]
    slowest = max(per_call)
    clocks = f"when the ranks' clocks say {seconds} s for the timed calls"
    if per_call[0] != slowest and all(math.isclose(r, per_call[0], rel_tol=1e-6) for r in results):
        fail(
            f"{what}: every rank returned rank 0's time, {clocks}, but rank 0 was not the slowest: take the "
            "maximum over the ranks (an all_reduce with ReduceOp.MAX)."
        )
    own = [
        r for r in range(n) if per_call[r] != slowest and math.isclose(results[r], per_call[r], rel_tol=1e-6)
    ]
    if own and len(own) == sum(1 for p in per_call if p != slowest) and n > 1:
        ranks = ", ".join(map(str, own))
        fail(
            f"{what}: rank(s) {ranks} returned their own time, {clocks}. The collective has finished only "
            "when the slowest rank has: every rank must return the maximum over the ranks (an all_reduce "
            "with ReduceOp.MAX), and read it only once that collective has finished (a handle from "
            "async_op=True must be waited on first)."
        )
    mistakes = {
        "average the ranks' times (the collective is done only when the slowest rank is)": sum(per_call) / n,
        "add up the ranks' times": sum(per_call),
        "forget to divide by the number of timed calls": slowest * iterations,
    }
    for rank, result in enumerate(results):
        if math.isclose(result, slowest, rel_tol=1e-6):
            continue
        message = f"{what}: rank {rank} returned {result:.9g}; expected {slowest:.9g} s per call, {clocks}."
        named = [m for m, value in mistakes.items() if math.isclose(result, value, rel_tol=1e-6)]
        if named:
            message += f" That is what you get if you {named[0]}."
        elif math.isclose(result, slowest, rel_tol=5e-2):
            message += (
                " Close, not exact: were the clock's readings kept in float32 (a tensor's default dtype)? "
                "float32 holds a clock that reads 123456.789 s only to about 0.01 s: subtract the "
                "readings as Python floats, or keep them in float64."
            )
        fail(message)


def _check_order(what: str, events: list[tuple], warmup: int, iterations: int) -> None:
    __tracebackhide__ = True

    def is_call(e: tuple) -> bool:
        return e[0] == "op" and e[2] == "broadcast_"

    for event in events:
        if is_collective(event) and event[2] != "barrier" and off_the_gpu(event):
            fail(
                f"{what}: its {event[2].strip('_')} carried a tensor made without the rank's device "
                "(the test gave each rank a stand-in GPU, which get_device() returns). It works on Gloo, "
                "but NCCL carries only tensors on the GPU: make what you send between ranks on "
                "get_device(), or move it there."
            )
    readings = [i for i, e in enumerate(events) if e[0] == "clock"]
    if len(readings) != 2:
        fail(
            f"{what}: read the clock it was given {counted(len(readings), 'time')}. Read it twice: just "
            "before the timed calls and just after all of them (a reading per call times the clock and "
            "the call's overhead as much as the collective)."
        )
    start, stop = readings
    before = events[:start]
    calls_before = [i for i, e in enumerate(before) if is_call(e)]
    if len(calls_before) != warmup:
        fail(
            f"{what}: made {counted(len(calls_before), 'call')} before starting the clock; the warm-up is "
            f"{warmup} untimed (they set up connections and buffers, which the timed calls must not pay for)."
        )
    settle = before[calls_before[-1] + 1 :] if calls_before else before
    if not any(e[0] == "op" and e[2] == "barrier" for e in settle):
        fail(
            f"{what}: no dist.barrier() between the warm-up and the first clock reading. Without it, each "
            "rank starts its clock when it gets there, and a rank that arrives early times the others' "
            "lateness."
        )
    if not any(e[0] == "sync" for e in settle):
        fail(
            f"{what}: no synchronize() between the warm-up and the first clock reading. On a GPU the "
            "warm-up may still be running when the clock starts: call synchronize() first."
        )
    window = events[start + 1 : stop]
    calls = [i for i, e in enumerate(window) if is_call(e)]
    if len(calls) != iterations:
        fail(
            f"{what}: made {counted(len(calls), 'call')} between the two clock readings; "
            f"time all {iterations}."
        )
    if any(e[0] == "sync" for e in window[calls[0] : calls[-1]]):
        fail(
            f"{what}: called synchronize() between timed calls. On a GPU that makes the host wait for each "
            "collective before it queues the next, so every call also pays the round trip of launching "
            "work and waiting for it: synchronize once, after the last timed call."
        )
    if not any(e[0] == "sync" for e in window[calls[-1] + 1 :]):
        fail(
            f"{what}: no synchronize() after the last timed call, before the clock's second reading. On a "
            "GPU the calls only queue work: without it you time the queueing, not the collective."
        )
    if any(e[0] == "op" and e[2] == "barrier" for e in window):
        fail(
            f"{what}: called dist.barrier() between the clock readings, so the time includes a barrier: an "
            "exchange between all ranks as long as a small collective. Line the ranks up before the first "
            "reading, not inside the timed window."
        )
    others = [
        e
        for e in window
        if not is_call(e) and e[0] != "sync" and not (e[0] == "op" and e[2] in VIEWS_AND_COPIES)
    ]
    if others:
        extra = describe_event(others[0])
        fail(f"{what}: between the clock readings it also ran {extra}; time the calls alone.")
