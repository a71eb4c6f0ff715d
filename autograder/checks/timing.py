"""Checking code that times things: a fake clock, a stand-in GPU, and a timeline of operations.

`FakeClock` makes a timed function's measurements known in advance, and records the clock
readings, the tensor operations and the synchronisations between them, so a test can check
what was timed; on a machine without a GPU it runs a GPU's code path on the ``meta`` device.
`Timeline` records every operation dispatched while it is active, for the benchmarks of 03.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from . import ledger
from .expect import counted, fail

# The tensor operations that count as a copy, and as a matrix multiply, in timed code. A copy is
# into a tensor made beforehand: clone and .to() make a new tensor each time, an allocation too.
COPY_OPS = ("copy_",)
MATMUL_OPS = ("mm", "addmm", "matmul", "bmm")
# What may also serve as the untimed warm-up of a copy: it copies, and makes its destination.
_WARM_UP_ALSO = {"copy_": ("clone", "_to_copy")}
# Operations that make a tensor without writing its memory: on Linux its untouched pages all map
# one page of zeros, so reading them is not reading memory.
_UNWRITTEN = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"})


class _Op(NamedTuple):
    """A tensor operation in a `FakeClock`'s timeline: its name, the dtype, size, shape and device
    type of its first tensor argument (or of what it made), whether it only made a view, and
    whether it read memory that nothing had written since it was allocated."""

    kind: str
    name: str
    dtype: torch.dtype
    numel: int
    shape: tuple
    device: str
    view: bool
    reads_unwritten: bool


class FakeClock:
    """A clock for timing code in tests: each (start, stop) pair of calls is ``durations[i]`` apart.

    Passing it where a function takes ``clock=time.perf_counter`` makes the measured times known
    in advance, so a test can check the function's arithmetic exactly. ``calls`` counts calls.
    Inside ``with clock.watch():`` it also records, in order, the clock readings and the tensor
    operations run between them, for `expect_timed_runs`; inside ``with clock.fake_gpu():``,
    the calls of ``torch.cuda.synchronize`` too, and tensors asked for on ``"cuda"`` are made on
    the ``meta`` device instead, so that a GPU's code path runs on a machine without one.
    """

    # (No instance dictionary: code handed the clock cannot shadow its methods, ``expect_all_read``
    # say, with its own.)
    __slots__ = ("readings", "calls", "timeline", "__weakref__")

    def __init__(self, durations: Sequence[float], start: float = 1000.0) -> None:
        self.readings: list[float] = []
        now = start
        for duration in durations:
            self.readings += [now, now + duration]
            now += duration + 1.0
        self.calls = 0
        # ("clock",), ("sync",) and operations (`_Op`)
        self.timeline: list[tuple] = []
        # What the checks read back: kept in a ledger, out of reach of the code the clock is handed
        # to (``readings``, ``calls`` and ``timeline`` are copies, for showing).
        ledger.keep(self, tuple(self.readings))

    def __call__(self) -> float:
        readings, events = ledger.read(self)
        calls = sum(event[0] == "clock" for event in events)
        if calls >= len(readings):
            fail(
                f"The clock was read {calls + 1} times, but the code should read it "
                f"{len(readings)} times: once before and once after each timed run (a run does "
                "all its iterations between those two readings), and never around the warm-up."
            )
        self._record(("clock",))
        self.calls = calls + 1
        return readings[calls]

    def _record(self, event: tuple) -> None:
        # Only for the clock's own code (a reading, a synchronisation, an operation watched).
        if sys._getframe(1).f_code.co_filename.startswith(ledger.CHECKS):
            ledger.add(self, event)
            self.timeline.append(event)

    def _events(self) -> tuple:
        """The clock's readings, synchronisations and operations, as the ledger holds them."""
        return ledger.read(self)[1]

    def expect_all_read(self, what: str) -> None:
        __tracebackhide__ = True
        readings, events = ledger.read(self)
        calls = sum(event[0] == "clock" for event in events)
        if calls == 0:
            fail(
                f"{what}: the clock it was given was never read. Time with the clock argument "
                "(the tests pass a fake one whose readings they know), not with time.perf_counter."
            )
        if calls != len(readings):
            fail(
                f"{what}: the clock was read {calls} times; expected {len(readings)} "
                "(before and after each timed run). Use the clock argument, not time.perf_counter."
            )

    def watch(self) -> _Watching:
        """Record the tensor operations run from now on, interleaved with the clock readings."""
        return _Watching(self._record)

    @contextlib.contextmanager
    def fake_gpu(self) -> Iterator[None]:
        """Run a GPU's code path here: ``device="cuda"`` makes ``meta`` tensors (which have a
        shape and a dtype but no data), and ``torch.cuda.synchronize()`` is recorded, not run."""
        record = self._record

        def synchronize(*args: Any, **kwargs: Any) -> None:
            record(("sync",))

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
        of ``dtype`` on the device asked for, reading memory that was written first, and no other
        work (views are no work); on a GPU, a synchronize between each reading and the last
        operation before it."""
        __tracebackhide__ = True
        device = "meta" if on_gpu else "cpu"
        where = "the GPU (here a stand-in for one)" if on_gpu else "the CPU"
        warm = set(ops).union(*(_WARM_UP_ALSO.get(op, ()) for op in ops))
        timeline = self._events()
        readings = [i for i, e in enumerate(timeline) if e[0] == "clock"]
        timed = [i for i, e in enumerate(timeline) if e[0] == "op" and e[1] in warm]
        if not readings or not timed or timed[0] > readings[0]:
            fail(f"{what}: no {operation} before the first clock reading; warm up with an untimed one.")
        for run, (start, stop) in enumerate(zip(readings[::2], readings[1::2], strict=False), start=1):
            inside = [e for e in timeline[start + 1 : stop] if e[0] == "op"]
            extra = [e for e in inside if e.name not in ops and not e.view]
            if extra:
                why = _EXTRA_WORK.get(extra[0].name, "make the tensors before the clock starts.")
                fail(
                    f"{what}: between the clock readings of timed run {run} it also ran torch's "
                    f"{extra[0].name} (on {extra[0].numel} {extra[0].dtype} elements). Time only the "
                    f"{operation}: {why}"
                )
            done = [e for e in inside if e.name in ops]
            if len(done) != per_run:
                fail(
                    f"{what}: timed run {run} ran the {operation} {counted(len(done), 'time')}; it should "
                    f"run it {counted(per_run, 'time')} (the iterations), all between one pair of clock "
                    "readings."
                )
            for op in done:
                if op.dtype != dtype or op.numel != numel:
                    fail(
                        f"{what}: timed run {run} did a {operation} of {op.numel} {op.dtype} elements "
                        f"(shape {list(op.shape)}); it should be of {numel} {dtype} elements."
                    )
                if op.device != device:
                    fail(
                        f"{what}: timed run {run} did its {operation} on the {op.device}, not on {where}: "
                        "make the tensors on the device the function is given."
                    )
                if op.reads_unwritten:
                    fail(
                        f"{what}: timed run {run} did its {operation} from a tensor that nothing wrote "
                        "after torch.empty made it. Untouched memory is not read from memory at all (on "
                        "Linux its pages all map one shared page of zeros), so the timing comes out too "
                        "fast. Fill the tensors it reads before timing, as STREAM does."
                    )
        if on_gpu:
            self._expect_synchronized(what, operation)

    def _expect_synchronized(self, what: str, operation: str) -> None:
        __tracebackhide__ = True
        last_work = None  # the latest operation that queues work on the GPU
        for event in self._events():
            if event[0] == "op" and not event.view:
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


# What to do instead of other work found in a timed run, where there is more to say.
_EXTRA_WORK = {
    "clone": "clone makes a new tensor every time, so each run also times an allocation. Copy into a "
    "tensor made before the clock starts.",
    "_to_copy": ".to() makes a new tensor every time, so each run also times an allocation. Copy into a "
    "tensor made before the clock starts.",
}

# Some operations that make a view of a tensor, and so move no data (kept for the checks that name
# them; a FakeClock tells a view by torch's own schema of the operation, which covers every view).
VIEWS = frozenset(
    {"alias", "as_strided", "detach", "expand", "lift_fresh", "narrow", "reshape", "select", "slice"}
    | {"squeeze", "t", "transpose", "unsqueeze", "_unsafe_view", "view"}
)


class _Watching(TorchDispatchMode):
    """Appends each tensor operation (`_Op`) to a timeline. It also follows which memory (on the
    CPU) was made by torch.empty and its kin and not written since, to tell a read of it."""

    def __init__(self, record: Callable[[tuple], None]) -> None:
        super().__init__()
        self.record = record
        self.unwritten: set[int] = set()  # storages' addresses

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func.overloadpacket.__name__
        schema = getattr(func, "_schema", None)
        returns, arguments = (schema.returns, schema.arguments) if schema is not None else ((), ())
        # A view returns an alias of an argument that it does not write; an in-place or out=
        # operation returns the argument it wrote.
        view = bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write for r in returns)
        written, read = [], []
        for i, argument in enumerate(arguments):
            value = args[i] if i < len(args) else kwargs.get(argument.name)
            is_written = argument.alias_info is not None and argument.alias_info.is_write
            (written if is_written else read).extend(tensors_in(value))
        reads_unwritten = any(_storage(t) in self.unwritten for t in read)
        for t in written:
            self.unwritten.discard(_storage(t))
        if not view:  # what the operation made: memory it wrote, unless it only allocated
            for t in tensors_in(out):
                if name in _UNWRITTEN:
                    self.unwritten.add(_storage(t))
                else:
                    self.unwritten.discard(_storage(t))
        self.unwritten.discard(None)
        first = next((a for a in args if isinstance(a, torch.Tensor)), None)
        if first is None:
            first = next(iter(tensors_in(out)), None)
        if first is not None:
            self.record(
                _Op(
                    "op",
                    name,
                    first.dtype,
                    first.numel(),
                    tuple(first.shape),
                    first.device.type,
                    view,
                    reads_unwritten,
                )
            )
        return out


def _storage(tensor: torch.Tensor) -> int | None:
    """Where a CPU tensor's memory starts (None elsewhere, or for no memory at all)."""
    if tensor.device.type != "cpu":
        return None
    return tensor.untyped_storage().data_ptr() or None


def warm_up() -> None:
    """Do ahead what the checks would otherwise do at their first use.

    Grading calls this in a kernel it starts while the notebook before runs
    (grading/spare_kernel.py): torch imports its compiler the first time any dispatch mode
    is entered, as `FakeClock.watch` and `Timeline` do, which takes a second on two cores.
    """
    with _Watching(lambda event: None):
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
    devices of what it returned. Fake clocks and ``synchronize`` add their own events. The
    checks read `recorded` (a ledger the code under test cannot change); ``events`` is a copy."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple] = []
        ledger.keep(self)

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        devices = sorted({str(t.device) for t in tensors_in(out)})
        totals = [_total(a) for a in args]
        self.add(("op", func.namespace, func.overloadpacket.__name__, totals, devices, *self._more(args)))
        return out

    def _more(self, args: tuple) -> tuple:
        """What a kind of timeline adds to an operation's event (nothing here)."""
        return ()

    def add(self, event: tuple) -> None:
        """Record an event (only the course's checks can: a clock's reading, a synchronisation)."""
        if sys._getframe(1).f_code.co_filename.startswith(ledger.CHECKS):
            ledger.add(self, event)
            self.events.append(event)

    def recorded(self) -> tuple:
        """The events, as the ledger holds them."""
        return ledger.read(self)[1]

    def clock(self, readings: Sequence[float]) -> Callable[[], float]:
        """A clock whose n-th reading is ``readings[n]`` (then a microsecond more each time)."""

        def read() -> float:
            n = sum(event[0] == "clock" for event in self.recorded())
            self.add(("clock",))
            return readings[n] if n < len(readings) else readings[-1] + 1e-6 * (n - len(readings) + 1)

        return read

    def synchronize(self) -> None:
        self.add(("sync",))


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
