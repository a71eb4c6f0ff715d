"""Checks that test cells call. A failing check says what was expected, where, and for which inputs.

Every check raises `CheckFailed` (an AssertionError, so nbgrader counts it as a failed test)
with a message a student can act on. Where a wrong answer is typical, the test passes it in
``mistakes`` and the message names the mistake instead of only the numbers.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from launcher import LaunchError, launch

# Taken when this module is imported, before any student code runs: a notebook that replaces
# torch.allclose or torch.equal (in the kernel, or inside a rank) cannot change what checks see.
allclose = torch.allclose
tensors_equal = torch.equal

# The tensor operations that count as a copy, and as a matrix multiply, in timed code.
COPY_OPS = ("copy_", "clone", "_to_copy")
MATMUL_OPS = ("mm", "addmm", "matmul", "bmm")


class CheckFailed(AssertionError):
    """A test's expectation was not met; the message explains what and where."""


def fail(message: str) -> NoReturn:
    __tracebackhide__ = True
    raise CheckFailed(message)


def expect_close(
    actual: Any,
    expected: float,
    what: str,
    *,
    rel: float = 1e-6,
    mistakes: dict[str, float] | None = None,
) -> None:
    """Check a number. ``mistakes`` maps a typical mistake's description to the value it gives."""
    __tracebackhide__ = True
    number = plain_number(actual)
    if number is None:
        fail(f"{what}: expected a number close to {expected:.6g}, got {actual!r} ({type(actual).__name__}).")
    actual = float(number)
    if math.isclose(actual, expected, rel_tol=rel, abs_tol=1e-12):
        return
    message = f"{what}: expected {expected:.6g}, got {actual:.6g}."
    for mistake, value in (mistakes or {}).items():
        if math.isclose(actual, value, rel_tol=rel, abs_tol=1e-12):
            message += f" That is what you get if you {mistake}."
            break
    else:
        if expected and actual and _is_power_of_eight_ratio(actual / expected):
            message += " It is off by a factor of 8: are bits and bytes mixed up?"
    fail(message)


def plain_number(value: Any) -> int | float | None:
    """``value`` as a built-in int or float, if it is one, a numpy scalar or a one-element tensor
    (of exactly those types: a subclass could say anything from ``__float__``); else None."""
    kind = type(value)
    if kind is int or kind is float:
        return value
    if kind is torch.Tensor and value.numel() == 1 and value.dtype is not torch.bool:
        return value.item()
    numpy = sys.modules.get("numpy")
    if numpy is not None and kind.__module__ == "numpy" and isinstance(value, numpy.number):
        return value.item()  # numpy's own scalar types only (a subclass's module is its own)
    return None


def _is_power_of_eight_ratio(ratio: float) -> bool:
    return any(math.isclose(ratio, f, rel_tol=1e-6) for f in (8.0, 1 / 8))


def expect_equal(actual: Any, expected: Any, what: str, *, mistakes: dict[str, Any] | None = None) -> None:
    """Check a value that has one right answer (a string, an int, a list of them, ...).

    Compared as the built-in values they stand for, so an object whose ``__eq__`` always says
    yes is not equal to anything; a list and a tuple of the same items are equal.
    """
    __tracebackhide__ = True
    if same_value(actual, expected):
        return
    message = f"{what}: expected {expected!r}, got {_short(actual)}."
    for mistake, value in (mistakes or {}).items():
        if same_value(actual, value):
            message += f" That is what you get if you {mistake}."
            break
    fail(message)


def same_value(actual: Any, expected: Any) -> bool:
    """Whether ``actual`` is ``expected``'s value, judged by ``expected``'s type, not ``actual``'s."""
    if isinstance(expected, (list, tuple)):
        return (
            isinstance(actual, (list, tuple))
            and len(actual) == len(expected)
            and all(same_value(a, e) for a, e in zip(actual, expected, strict=True))
        )
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and set(actual) == set(expected)
            and all(same_value(actual[k], expected[k]) for k in expected)
        )
    if isinstance(expected, bool) or expected is None:
        return actual is expected
    if isinstance(expected, int):
        number = plain_number(actual)
        return type(number) is int and number == expected
    if isinstance(expected, float):
        number = plain_number(actual)
        return number is not None and float(number) == expected
    if isinstance(expected, str):
        return isinstance(actual, str) and str.__eq__(actual, expected) is True
    if isinstance(expected, torch.Tensor):
        return isinstance(actual, torch.Tensor) and _same(actual, expected, exact=True)
    return type(actual) is type(expected) and bool(actual == expected)


def expect_tensor(
    actual: Any,
    expected: torch.Tensor,
    what: str,
    *,
    mistakes: dict[str, torch.Tensor] | None = None,
    exact: bool | None = None,
) -> None:
    """Check a tensor's type, shape, dtype and values; name the first element that differs.

    Values must be equal for integer tensors (or when ``exact``), close otherwise.
    """
    __tracebackhide__ = True
    if not isinstance(actual, torch.Tensor):
        fail(f"{what}: expected a tensor, got {_short(actual)} ({type(actual).__name__}).")
    if actual.shape != expected.shape:
        message = f"{what}: expected shape {tuple(expected.shape)}, got {tuple(actual.shape)}."
    elif actual.dtype != expected.dtype:
        message = f"{what}: expected dtype {expected.dtype}, got {actual.dtype}."
    elif _same(actual, expected, exact):
        return
    else:
        message = f"{what}: expected {_short(expected)}, got {_short(actual)}"
        index = int((actual.detach().cpu() != expected.detach().cpu()).flatten().nonzero()[0])
        message += (
            f"; the first difference is at flat index {index}: expected "
            f"{expected.flatten()[index].item()!r}, got {actual.flatten()[index].item()!r}."
        )
    for mistake, value in (mistakes or {}).items():
        if value.shape == actual.shape and value.dtype == actual.dtype and _same(actual, value, exact):
            message += f" That is what you get if you {mistake}."
            break
    fail(message)


def close_floats(actual: Any, expected: torch.Tensor, atol: float = 1e-5) -> bool:
    """Whether ``actual`` is a floating-point tensor (of any float dtype) close to ``expected``."""
    return (
        type(actual) is torch.Tensor
        and actual.shape == expected.shape
        and actual.is_floating_point()
        and allclose(actual.detach().float(), expected.float(), rtol=1e-4, atol=atol)
    )


def expect_floats(
    what: str,
    actual: Any,
    expected: torch.Tensor,
    reference: str,
    *,
    mistakes: dict[str, torch.Tensor] | None = None,
    nan_means: str = "",
    atol: float = 1e-5,
) -> None:
    """Check a floating-point result of any float dtype against ``expected``, computed here from
    ``reference`` (named in the message, with the largest difference). ``mistakes`` map a typical
    mistake to the value it gives; ``nan_means`` says what NaN in the result points to."""
    __tracebackhide__ = True
    if type(actual) is not torch.Tensor:
        fail(f"{what}: expected a tensor of shape {tuple(expected.shape)}, got {_short(actual)}.")
    if actual.shape != expected.shape:
        fail(f"{what}: expected shape {tuple(expected.shape)}, got {tuple(actual.shape)}.")
    if not actual.is_floating_point():
        fail(f"{what}: expected a floating-point tensor, got {actual.dtype}.")
    if close_floats(actual, expected, atol):
        return
    difference = (actual.detach().float() - expected.float()).abs()
    message = f"{what}: differs from {reference} (largest difference {difference.max():.3g})."
    if nan_means and difference.isnan().any():
        message = f"{what}: holds NaN. {nan_means}"
    for mistake, value in (mistakes or {}).items():
        if close_floats(actual, value, atol):
            message += f" That is what you get if you {mistake}."
            break
    fail(message)


def _same(a: torch.Tensor, b: torch.Tensor, exact: bool | None) -> bool:
    a, b = a.detach().cpu(), b.detach().cpu()
    if exact or (exact is None and not a.is_floating_point()):
        return a.shape == b.shape and a.dtype == b.dtype and tensors_equal(a, b)
    return a.shape == b.shape and allclose(a, b, rtol=1e-5, atol=1e-6)


def _short(value: Any, limit: int = 160) -> str:
    if isinstance(value, torch.Tensor):
        text = str(value.tolist()) if value.numel() <= 16 else f"tensor of shape {tuple(value.shape)}"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def fresh_seed() -> int:
    """A seed no notebook can know in advance: each check draws its own."""
    return int.from_bytes(os.urandom(6), "little")


def private_generator() -> torch.Generator:
    """A generator, in a rank, whose numbers no other process can reproduce."""
    return torch.Generator().manual_seed(fresh_seed())


def counted(n: int, noun: str) -> str:
    """``"1 rank"``, ``"3 ranks"``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def run_ranks(
    fn: Callable[..., Any], world_size: int, *args: Any, timeout: float = 20, what: str = "", **kwargs: Any
) -> list:
    """`launch` for tests: a failure becomes a CheckFailed that keeps the launcher's report.

    Tests run on Gloo, on the CPU, wherever they run, so that a test means the same with or
    without GPUs. ``what`` says what was being run, for the message (default: the function's name).
    """
    __tracebackhide__ = True
    try:
        return launch(fn, world_size, *args, backend="gloo", timeout=timeout, **kwargs)
    except LaunchError as err:
        report = str(err)
    # Failing here, outside the except block, shows the launcher's report once: inside it,
    # Python would print the LaunchError too, "during handling" of which this one happened.
    ranks = f"{world_size} rank{'s' if world_size != 1 else ''}"
    fail(f"{what or getattr(fn, '__name__', 'the function')} on {ranks} failed:\n{report}")


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
            first = next(iter(_tensors(out)), None)
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
        devices = sorted({str(t.device) for t in _tensors(out)})
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


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    return []


def _total(value: Any) -> int | None:
    """The elements of the tensors in one argument; None for an argument holding no tensor."""
    tensors = _tensors(value)
    return sum(t.numel() for t in tensors) if tensors else None


def describe_event(event: tuple) -> str:
    if event[0] == "op":
        return f"{event[1]}.{event[2]}" if event[1] != "aten" else f"torch's {event[2]}"
    return {"clock": "a clock reading", "sync": "synchronize()"}[event[0]]


def expect_answer(
    actual: Any, expected: float, what: str, explanation: str, mistakes: dict | None = None
) -> None:
    """A worked problem's numeric answer, to within 1% (the precision a person would print); if it
    is wrong, the message says how the right one is reached."""
    __tracebackhide__ = True
    if type(actual) not in (float, int) or not math.isfinite(actual):
        fail(f"{what}: expected a number, got {actual!r}.")
    try:
        expect_close(actual, expected, what, rel=0.01, mistakes=mistakes)
    except AssertionError as err:
        message = str(err)
    else:
        return
    fail(f"{message}\n{explanation}")


def expect_whole_number(
    actual: Any, expected: int, what: str, explanation: str, mistakes: dict | None = None
) -> None:
    """A worked problem's answer that is a count (a batch size, a number of steps): exactly
    ``expected``, as an int or a float with nothing after the point; if it is wrong, the message
    says how the right one is reached."""
    __tracebackhide__ = True
    number = plain_number(actual)
    if number is None or not math.isfinite(number) or float(number) != int(number):
        fail(f"{what}: expected a whole number, got {actual!r}.\n{explanation}")
    message = f"{what}: expected {expected}, got {int(number)}."
    if int(number) == expected:
        return
    for mistake, value in (mistakes or {}).items():
        if int(number) == value:
            message += f" That is what you get if you {mistake}."
            break
    fail(f"{message}\n{explanation}")
