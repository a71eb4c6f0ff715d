"""Checks for notebook 03 (benchmarking collectives).

A benchmark is graded on what it does, in order, never on how fast anything ran: inside each
rank, a fake clock with known readings, a recording ``synchronize`` and a dispatch mode that
sees every tensor operation and collective write one timeline, which the check then reads.
The values a test expects (sizes, formulas) come from the test cell, so that nothing here
gives an exercise's answer away.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.distributed as dist

import launcher

from .checks import Timeline, counted, describe_event, expect_close, fail, run_ranks

# The ranks run this module's functions: have the fork server import it once, for every rank.
launcher.preload("autograder.benchmarking")

_float = float  # the checks compare types with what they captured here, not what a cell rebinds
_type = type

# Operations a collective call may dispatch besides the collective itself: views of its tensors,
# and the copies Gloo makes into its outputs. Anything else inside a timed call is extra work.
VIEWS_AND_COPIES = frozenset(
    {
        "alias",
        "as_strided",
        "chunk",
        "copy_",
        "detach",
        "expand",
        "narrow",
        "reshape",
        "select",
        "slice",
        "split",
        "split_with_sizes",
        "squeeze",
        "t",
        "transpose",
        "unbind",
        "unsqueeze",
        "_unsafe_view",
        "view",
    }
)


# -- exercise: the tensors and the call of each collective --------------------------------------

# For each collective: the c10d operations that do it (the tensor form and the list form), as
# the dispatcher names them.
OPERATIONS = {
    "all_reduce": ("allreduce_",),
    "broadcast": ("broadcast_",),
    "reduce": ("reduce_",),
    "all_gather": ("_allgather_base_", "allgather_"),
    "reduce_scatter": ("_reduce_scatter_base_", "reduce_scatter_"),
    "gather": ("gather_",),
    "scatter": ("scatter_",),
    "all_to_all": ("alltoall_base_", "alltoall_"),
}


def _calls_on_rank(
    rank: int, world_size: int, make: Callable, cases: list[tuple[str, int]], device: str
) -> list:
    """Inside a rank: make each collective's call, record what making it and calling it twice do."""
    found = []
    for name, size in cases:
        made = Timeline()
        with made:
            run = make(name, size, world_size, torch.device(device))
        called = Timeline()
        if device != "meta":
            with called:
                run()
                run()
        found.append((made.events, called.events))
    return found


def check_collective_call(
    collective_call: Callable,
    expected: Callable[[str, int, int, int], list[int]],
    names: Sequence[str],
    sizes: Sequence[int],
    world_sizes: Sequence[int] = (4,),
) -> None:
    """Check ``collective_call(name, size_bytes, world_size, device)`` on every rank.

    ``expected(name, rank, world_size, chunk)`` gives, for the rank, the number of elements in
    each tensor argument of the collective (as the dispatcher sees it, input and output), where
    ``chunk = size_bytes // (4 * world_size)``. Each call must issue exactly that collective, on
    float32 tensors allocated when the call is made, and do nothing else.
    """
    __tracebackhide__ = True
    cases = [(name, size) for name in names for size in sizes]
    for world_size in world_sizes:
        per_rank = run_ranks(
            _calls_on_rank, world_size, collective_call, cases, "cpu", what="collective_call"
        )
        for rank, found in enumerate(per_rank):
            for (name, size), (_, called) in zip(cases, found, strict=True):
                chunk = size // (4 * world_size)
                what = f"collective_call({name!r}, {size}, world_size={world_size}) on rank {rank}"
                _check_one_call(what, name, called, expected(name, rank, world_size, chunk))
    # The device given is where the tensors go: "meta" stands in for a GPU, which this machine lacks.
    per_rank = run_ranks(_calls_on_rank, 2, collective_call, [(n, 4096) for n in names], "meta")
    for (name, _), (made, _) in zip([(n, 4096) for n in names], per_rank[0], strict=True):
        devices = {d for event in made if event[0] == "op" for d in event[4]}
        if devices - {"meta"}:
            fail(
                f"collective_call({name!r}, 4096, 2, device=torch.device('meta')) made tensors on "
                f"{', '.join(sorted(devices - {'meta'}))}: make every tensor on the device it is given "
                "(on a GPU, that is the rank's cuda device)."
            )


def _check_one_call(what: str, name: str, called: list[tuple], sizes: list[int]) -> None:
    __tracebackhide__ = True
    collectives = [e for e in called if e[0] == "op" and e[1] == "c10d"]
    extra = [e for e in called if e[0] == "op" and e[1] != "c10d" and e[2] not in VIEWS_AND_COPIES]
    if extra:
        fail(
            f"{what}: calling what it returns also runs {describe_event(extra[0])}. Make the tensors once, "
            "in collective_call; the call itself must do the collective and nothing else, since it is "
            "what the benchmark times."
        )
    if len(collectives) != 2:
        fail(
            f"{what}: calling what it returns twice issued {len(collectives)} collectives, not one per call."
        )
    op, args = collectives[0][2], collectives[0][3]
    if op not in OPERATIONS[name]:
        fail(f"{what}: calling what it returns issued {op}, which is not {name}.")
    numels = [n for n in args if n is not None]
    if numels != sizes:
        fail(
            f"{what}: the {name} moved tensors of {numels} elements (its arguments as torch passes them "
            f"on); expected {sizes}. The whole array is world_size x chunk elements, with "
            "chunk = size_bytes // (4 * world_size) float32 elements."
        )


# -- exercise: timing a collective ---------------------------------------------------------------

# What each rank's clock says the timed calls took, in seconds: rank 0 is never the slowest.
RANK_SECONDS = (0.30, 0.50, 0.20, 0.40)


def _benchmark_on_rank(
    rank: int, world_size: int, benchmark: Callable, warmup: int, iterations: int
) -> tuple:
    timeline = Timeline()
    data = torch.arange(1000, dtype=torch.float32)

    def run() -> None:
        dist.broadcast(data, src=0)

    clock = timeline.clock([1000.0, 1000.0 + RANK_SECONDS[rank % len(RANK_SECONDS)]])
    with timeline:
        result = benchmark(
            run, warmup=warmup, iterations=iterations, clock=clock, synchronize=timeline.synchronize
        )
    return result, timeline.events


def check_benchmark(
    benchmark: Callable, world_sizes: Sequence[int] = (2,), warmup: int = 2, iterations: int = 10
) -> None:
    """Check ``benchmark(run, warmup=, iterations=, clock=, synchronize=)`` on every rank: the order
    of what it does, and that every rank returns the slowest rank's seconds per call."""
    __tracebackhide__ = True
    for world_size in world_sizes:
        per_rank = run_ranks(_benchmark_on_rank, world_size, benchmark, warmup, iterations, what="benchmark")
        what = f"benchmark(run, warmup={warmup}, iterations={iterations}) on {counted(world_size, 'rank')}"
        for rank, (_, events) in enumerate(per_rank):
            _check_order(f"{what}, rank {rank}", events, warmup, iterations)
        seconds = [RANK_SECONDS[r % len(RANK_SECONDS)] for r in range(world_size)]
        _check_results(what, [result for result, _ in per_rank], seconds, iterations)


def _check_results(what: str, results: list, seconds: list[float], iterations: int) -> None:
    """Every rank must return the slowest rank's seconds per call; name the usual wrong answers."""
    __tracebackhide__ = True
    for rank, result in enumerate(results):
        if _type(result) is not _float:
            fail(f"{what}: rank {rank} returned {result!r} ({_type(result).__name__}); return a float.")
    clocks = f"when the ranks' clocks say {seconds} s for the timed calls"
    per_call = [s / iterations for s in seconds]
    if len(set(per_call)) > 1 and all(math.isclose(r, s) for r, s in zip(results, per_call, strict=True)):
        fail(
            f"{what}: each rank returned its own time, {clocks}. The collective has finished only when the "
            "slowest rank has: take the maximum over the ranks (an all_reduce with ReduceOp.MAX)."
        )
    if per_call[0] != max(per_call) and all(math.isclose(r, per_call[0]) for r in results):
        fail(
            f"{what}: every rank returned rank 0's time, {clocks}, but rank 0 was not the slowest: take the "
            "maximum over the ranks (an all_reduce with ReduceOp.MAX)."
        )
    for rank, result in enumerate(results):
        expect_close(
            result,
            max(per_call),
            f"{what}: rank {rank}'s result, {clocks}",
            rel=1e-6,
            mistakes={
                "average the ranks' times (the collective is done only when the slowest rank is)": (
                    sum(per_call) / len(per_call)
                ),
                "add up the ranks' times": sum(per_call),
                "forget to divide by the number of timed calls": max(seconds),
            },
        )


def _check_order(what: str, events: list[tuple], warmup: int, iterations: int) -> None:
    __tracebackhide__ = True

    def is_call(e: tuple) -> bool:
        return e[0] == "op" and e[2] == "broadcast_"

    readings = [i for i, e in enumerate(events) if e[0] == "clock"]
    if len(readings) != 2:
        fail(
            f"{what}: read the clock it was given {len(readings)} times. Read it exactly twice: once "
            "just before the timed calls and once just after all of them (one reading per call "
            "measures the clock and the call's overhead more than the collective)."
        )
    start, stop = readings
    before = events[:start]
    calls_before = [i for i, e in enumerate(before) if is_call(e)]
    if len(calls_before) != warmup:
        fail(
            f"{what}: made {len(calls_before)} calls before starting the clock; the warm-up is {warmup} "
            "untimed calls (they set up connections and buffers, which the timed calls must not pay for)."
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
    calls = [e for e in window if is_call(e)]
    if len(calls) != iterations:
        fail(
            f"{what}: made {len(calls)} calls between the two clock readings; time all {iterations} of them."
        )
    last_call = max(i for i, e in enumerate(window) if is_call(e))
    if not any(e[0] == "sync" for e in window[last_call + 1 :]):
        fail(
            f"{what}: no synchronize() after the last timed call, before the clock's second reading. On a "
            "GPU the calls only queue work: without it you time the queueing, not the collective."
        )
    others = [
        e
        for e in window
        if not is_call(e) and e[0] != "sync" and not (e[0] == "op" and e[2] in VIEWS_AND_COPIES)
    ]
    if others:
        extra = describe_event(others[0])
        fail(f"{what}: between the clock readings it also ran {extra}; time the calls alone.")


# -- exercise: the sweep -------------------------------------------------------------------------


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
            fail("sweep called the timer outside the ranks: call it inside the function you launch.")
        return self.seconds(world_size, size)


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
            with _counting_launches() as launches:
                result = sweep(name, list(sizes), world_size, timer)
            what = f"sweep({name!r}, {list(sizes)}, world_size={world_size}, timer)"
            if len(launches) != 1:
                fail(
                    f"{what} launched ranks {len(launches)} times. Launch once and loop over the sizes "
                    "inside the ranks: every launch starts and connects the ranks anew."
                )
            if _type(result) is not list or len(result) != len(sizes):
                fail(f"{what} returned {result!r}; expected a list with one (seconds, busbw) pair per size.")
            for size, pair in zip(sizes, result, strict=True):
                if _type(pair) is not tuple or len(pair) != 2 or any(_type(x) is not _float for x in pair):
                    fail(f"{what}: for {size} bytes it returned {pair!r}; expected a pair of floats.")
                chunk = size // (4 * world_size)
                seconds = timer.seconds(world_size, size)
                expect_close(pair[0], seconds, f"{what}: seconds per call for {size} bytes", rel=1e-9)
                count = input_elements(name, world_size, chunk)
                _, busbw = bandwidths(name, count, torch.float32, seconds, world_size)
                expect_close(
                    pair[1],
                    busbw,
                    f"{what}: busbw for {size} bytes (your bandwidths() of the {count}-element input each "
                    f"rank passes to {name}, at {seconds:.6g} s)",
                    rel=1e-9,
                    mistakes={
                        "pass bandwidths() the size in bytes, not in elements": bandwidths(
                            name, size, torch.float32, seconds, world_size
                        )[1],
                        "pass bandwidths() the size asked for, in elements, whatever each rank's input": (
                            bandwidths(name, size // 4, torch.float32, seconds, world_size)[1]
                        ),
                    },
                )


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


# -- exercise: the error of a sum ----------------------------------------------------------------


def _sums_in_orders(values: torch.Tensor) -> torch.Tensor:
    """Each column of ``values`` (ranks x elements) summed in every rotation and both directions,
    in its own dtype: rows are the orders."""
    p = values.shape[0]
    orders = []
    for shift in range(p):
        for step in (1, -1):
            total = torch.zeros_like(values[0])
            for k in range(p):
                total = total + values[(shift + step * k) % p]
            orders.append(total)
    return torch.stack(orders)


def hard_sums(p: int, dtype: torch.dtype, generator: torch.Generator) -> list[torch.Tensor]:
    """Inputs (p ranks x elements) on which float sums in different orders differ most: one large
    value among small ones, large values that cancel, and random ones of mixed signs."""
    u = torch.finfo(dtype).eps / 2
    one_large = torch.full((p, 4), u, dtype=torch.float64)
    one_large[0] = 1.0
    cancelling = torch.randn(p, 64, generator=generator, dtype=torch.float64) * 1e3
    cancelling[-1] = -cancelling[:-1].sum(0) + torch.randn(64, generator=generator, dtype=torch.float64)
    mixed = torch.randn(p, 256, generator=generator, dtype=torch.float64) * torch.logspace(
        0, 6, 256, dtype=torch.float64
    )
    return [x.to(dtype) for x in (one_large, cancelling, mixed)]


def check_sum_bound(
    bound_fn: Callable,
    world_sizes: Sequence[int],
    dtypes: Sequence[torch.dtype],
    loosest: Callable[[torch.Tensor, int, torch.dtype], torch.Tensor] | None = None,
) -> None:
    """``bound_fn(abs_sum, world_size, dtype)`` must hold for every pair of summation orders on
    hard inputs, and, if the test gives ``loosest``, be no larger than that (to within the
    rounding of a bound computed in ``dtype``)."""
    __tracebackhide__ = True
    generator = torch.Generator().manual_seed(3)
    for p in world_sizes:
        for dtype in dtypes:
            for values in hard_sums(p, dtype, generator):
                _check_bound_on(bound_fn, values, p, dtype, loosest)


def _check_bound_on(
    bound_fn: Callable, values: torch.Tensor, p: int, dtype: torch.dtype, loosest: Callable | None
) -> None:
    __tracebackhide__ = True
    abs_sum = values.abs().sum(0, dtype=torch.float64).to(dtype)
    bound = bound_fn(abs_sum, p, dtype)
    what = f"your bound for {p} ranks in {dtype}"
    if _type(bound) is not torch.Tensor or bound.shape != abs_sum.shape:
        fail(f"{what}: expected a tensor of shape {tuple(abs_sum.shape)}, got {bound!r:.80}.")
    sums = _sums_in_orders(values).double()
    spread = (sums.max(0).values - sums.min(0).values).abs()
    bound64 = bound.double()
    worst = int(torch.argmax(spread - bound64))
    if spread[worst] > bound64[worst]:
        fail(
            f"{what}: two orders of summing the same {p} values differ by {spread[worst].item():.3g}, more "
            f"than your bound of {bound64[worst].item():.3g} for that element (the values' absolute sum is "
            f"{abs_sum[worst].item():.3g}). A bound must hold whatever the values: it grows with each "
            "addition, and with the size of the values, not of their sum."
        )
    if loosest is None:
        return
    u = torch.finfo(dtype).eps / 2
    limit = loosest(abs_sum.double(), p, dtype) * (1 + 4 * u) + torch.finfo(dtype).tiny
    if bool((bound64 > limit).any()):
        fail(f"{what} is more than twice as large as it needs to be: count more carefully, and tighten it.")


def expect_floats(what: str, *values: Any) -> None:
    """Each value must be a Python float: not a tensor, a numpy number or an int."""
    __tracebackhide__ = True
    for value in values:
        if _type(value) is not _float:
            fail(
                f"{what} gave {value!r} ({_type(value).__name__}); return Python floats: float(x) makes one."
            )
