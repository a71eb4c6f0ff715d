"""Checking code that times things: a fake clock, a stand-in GPU, and a timeline of operations.

`FakeClock` makes a timed function's measurements known in advance, and records the clock
readings, the tensor operations and the synchronisations between them, so a test can check
what was timed; on a machine without a GPU it runs a GPU's code path on the ``meta`` device.
`Timeline` records every operation dispatched while it is active, for the benchmarks of 03.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from .expect import counted, fail

# The tensor operations that count as a copy, and as a matrix multiply, in timed code.
COPY_OPS = ("copy_", "clone", "_to_copy")
MATMUL_OPS = ("mm", "addmm", "matmul", "bmm")


class FakeClock:
    """A clock for timing code in tests: each (start, stop) pair of calls is ``durations[i]`` apart.

    Passing it where a function takes ``clock=time.perf_counter`` makes the measured times known
    in advance, so a test can check the function's arithmetic exactly. ``calls`` counts calls.
    Inside ``with clock.watch():`` it also records, in order, the clock readings and the tensor
    operations run between them, for `expect_timed_runs`; inside ``with clock.fake_gpu():``,
    the calls of ``torch.cuda.synchronize`` too, and tensors asked for on ``"cuda"`` are made on
    the ``meta`` device instead, so that a GPU's code path runs on a machine without one.
    """

    def __init__(self, durations: Sequence[float], start: float = 1000.0) -> None:
        self.readings: list[float] = []
        now = start
        for duration in durations:
            self.readings += [now, now + duration]
            now += duration + 1.0
        self.calls = 0
        # ("clock",), ("sync",) and ("op", name, dtype, numel, shape, device type)
        self.timeline: list[tuple] = []

    def __call__(self) -> float:
        if self.calls >= len(self.readings):
            fail(
                f"The clock was read {self.calls + 1} times, but the code should read it "
                f"{len(self.readings)} times: once before and once after each timed run (a run does "
                "all its iterations between those two readings), and never around the warm-up."
            )
        reading = self.readings[self.calls]
        self.calls += 1
        self.timeline.append(("clock",))
        return reading

    def expect_all_read(self, what: str) -> None:
        __tracebackhide__ = True
        if self.calls == 0:
            fail(
                f"{what}: the clock it was given was never read. Time with the clock argument "
                "(the tests pass a fake one whose readings they know), not with time.perf_counter."
            )
        if self.calls != len(self.readings):
            fail(
                f"{what}: the clock was read {self.calls} times; expected {len(self.readings)} "
                "(before and after each timed run). Use the clock argument, not time.perf_counter."
            )

    def watch(self) -> _Watching:
        """Record the tensor operations run from now on, interleaved with the clock readings."""
        return _Watching(self.timeline)

    @contextlib.contextmanager
    def fake_gpu(self) -> Iterator[None]:
        """Run a GPU's code path here: ``device="cuda"`` makes ``meta`` tensors (which have a
        shape and a dtype but no data), and ``torch.cuda.synchronize()`` is recorded, not run."""
        timeline = self.timeline

        def synchronize(*args: Any, **kwargs: Any) -> None:
            timeline.append(("sync",))

        patched = [(torch.cuda, "synchronize", synchronize), (torch.cuda, "is_available", lambda: True)]
        if hasattr(torch, "accelerator") and hasattr(torch.accelerator, "synchronize"):
            patched.append((torch.accelerator, "synchronize", synchronize))
        saved = [(module, name, getattr(module, name)) for module, name, _ in patched]
        for module, name, value in patched:
            setattr(module, name, value)
        try:
            with _CudaOnMeta():
                yield
        finally:
            for module, name, value in saved:
                setattr(module, name, value)

    def expect_timed_runs(
        self,
        what: str,
        ops: tuple[str, ...],
        operation: str,
        dtype: torch.dtype,
        numel: int,
        *,
        per_run: int = 1,
        on_gpu: bool = False,
    ) -> None:
        """Check the timeline: at least one ``ops`` operation (the warm-up) before the first
        reading; between each start and stop, exactly ``per_run`` of them, on ``numel`` elements
        of ``dtype`` on the device asked for, and no other work; on a GPU, a synchronize between
        each reading and the last operation before it."""
        __tracebackhide__ = True
        device = "meta" if on_gpu else "cpu"
        where = "the GPU (here a stand-in for one)" if on_gpu else "the CPU"
        readings = [i for i, e in enumerate(self.timeline) if e[0] == "clock"]
        timed = [i for i, e in enumerate(self.timeline) if e[0] == "op" and e[1] in ops]
        if not readings or not timed or timed[0] > readings[0]:
            fail(f"{what}: no {operation} before the first clock reading; warm up with an untimed one.")
        for run, (start, stop) in enumerate(zip(readings[::2], readings[1::2], strict=False), start=1):
            inside = [e for e in self.timeline[start + 1 : stop] if e[0] == "op"]
            extra = [e for e in inside if e[1] not in ops and e[1] not in VIEWS]
            if extra:
                fail(
                    f"{what}: between the clock readings of timed run {run} it also ran torch's "
                    f"{extra[0][1]} (on {extra[0][3]} {extra[0][2]} elements). Time only the {operation}: "
                    "make the tensors before the clock starts."
                )
            done = [e for e in inside if e[1] in ops]
            if len(done) != per_run:
                fail(
                    f"{what}: timed run {run} ran the {operation} {counted(len(done), 'time')}; it should "
                    f"run it {counted(per_run, 'time')} (the iterations), all between one pair of clock "
                    "readings."
                )
            for _, _, op_dtype, op_numel, shape, op_device in done:
                if op_dtype != dtype or op_numel != numel:
                    fail(
                        f"{what}: timed run {run} did a {operation} of {op_numel} {op_dtype} elements "
                        f"(shape {list(shape)}); it should be of {numel} {dtype} elements."
                    )
                if op_device != device:
                    fail(
                        f"{what}: timed run {run} did its {operation} on the {op_device}, not on {where}: "
                        "make the tensors on the device the function is given."
                    )
        if on_gpu:
            self._expect_synchronized(what, operation)

    def _expect_synchronized(self, what: str, operation: str) -> None:
        __tracebackhide__ = True
        last_work = None  # the latest operation that queues work on the GPU
        for event in self.timeline:
            if event[0] == "op" and event[1] not in VIEWS:
                last_work = event
            elif event[0] == "sync":
                last_work = None
            elif event[0] == "clock" and last_work is not None:
                fail(
                    f"{what}: on a GPU, it read the clock after torch's {last_work[1]} with no "
                    "torch.cuda.synchronize() in between. GPU work runs asynchronously: without it, "
                    f"the clock times the queueing of the {operation}, not the {operation} itself. "
                    "Synchronize just before each reading of the clock."
                )


# Operations that make a view of a tensor, and so move no data: allowed beside a timed operation.
VIEWS = frozenset(
    {"alias", "as_strided", "detach", "expand", "lift_fresh", "narrow", "reshape", "select", "slice"}
    | {"squeeze", "t", "transpose", "unsqueeze", "_unsafe_view", "view"}
)


class _Watching(TorchDispatchMode):
    """Appends each tensor operation (name, dtype, size and device of its first tensor argument,
    or of what it made when it has none) to a timeline."""

    def __init__(self, timeline: list[tuple]) -> None:
        super().__init__()
        self.timeline = timeline

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        first = next((a for a in args if isinstance(a, torch.Tensor)), None)
        if first is None:
            first = next(iter(tensors_in(out)), None)
        if first is not None:
            self.timeline.append(
                (
                    "op",
                    func.overloadpacket.__name__,
                    first.dtype,
                    first.numel(),
                    tuple(first.shape),
                    first.device.type,
                )
            )
        return out


def warm_up() -> None:
    """Do ahead what the checks would otherwise do at their first use.

    Grading calls this in a kernel it starts while the notebook before runs
    (grading/spare_kernel.py): torch imports its compiler the first time any dispatch mode
    is entered, as `FakeClock.watch` and `Timeline` do, which takes a second on two cores.
    """
    with _Watching([]):
        torch.empty(0)


class _CudaOnMeta(TorchFunctionMode):
    """Sends every tensor asked for on a CUDA device to the ``meta`` device instead."""

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = {k: _off_cuda(v) if k == "device" else v for k, v in (kwargs or {}).items()}
        name = getattr(func, "__name__", "")
        if name == "cuda" and args and isinstance(args[0], torch.Tensor):
            return args[0].to("meta")
        if name in ("to", "new_empty", "new_zeros", "new_ones", "new_full"):
            args = tuple(_off_cuda(a) for a in args)
        return func(*args, **kwargs)


def _off_cuda(value: Any) -> Any:
    if isinstance(value, torch.device) and value.type == "cuda":
        return torch.device("meta")
    if isinstance(value, str) and value.split(":")[0] == "cuda":
        return torch.device("meta")
    return value


class Timeline(TorchDispatchMode):
    """Records, in order, every operation dispatched while it is active: ``("op", namespace, name,
    totals)`` with the number of elements in each tensor argument (None for others) and the
    devices of what it returned. Fake clocks and ``synchronize`` add their own events."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        devices = sorted({str(t.device) for t in tensors_in(out)})
        self.events.append(
            ("op", func.namespace, func.overloadpacket.__name__, [_total(a) for a in args], devices)
        )
        return out

    def clock(self, readings: Sequence[float]) -> Callable[[], float]:
        """A clock whose n-th reading is ``readings[n]`` (then a microsecond more each time)."""
        count = [0]

        def read() -> float:
            n = count[0]
            count[0] += 1
            self.events.append(("clock",))
            return readings[n] if n < len(readings) else readings[-1] + 1e-6 * (n - len(readings) + 1)

        return read

    def synchronize(self) -> None:
        self.events.append(("sync",))


def tensors_in(value: Any) -> list[torch.Tensor]:
    """The tensors in what an operation took or returned (a tensor, or lists and tuples of them)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensors_in(item)]
    return []


def _total(value: Any) -> int | None:
    """The elements of the tensors in one argument; None for an argument holding no tensor."""
    tensors = tensors_in(value)
    return sum(t.numel() for t in tensors) if tensors else None


def describe_event(event: tuple) -> str:
    if event[0] == "op":
        return f"{event[1]}.{event[2]}" if event[1] != "aten" else f"torch's {event[2]}"
    return {"clock": "a clock reading", "sync": "synchronize()"}[event[0]]
