"""Checks that test cells call. A failing check says what was expected, where, and for which inputs.

Every check raises `CheckFailed` (an AssertionError, so nbgrader counts it as a failed test)
with a message a student can act on. Where a wrong answer is typical, the test passes it in
``mistakes`` and the message names the mistake instead of only the numbers.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import torch
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
    operations run between them, for `expect_timed_runs`.
    """

    def __init__(self, durations: Sequence[float], start: float = 1000.0) -> None:
        self.readings: list[float] = []
        now = start
        for duration in durations:
            self.readings += [now, now + duration]
            now += duration + 1.0
        self.calls = 0
        self.timeline: list[tuple] = []  # ("clock",) and ("op", name, dtype, numel, shape)

    def __call__(self) -> float:
        if self.calls >= len(self.readings):
            fail(
                f"The clock was read {self.calls + 1} times, but the code should read it "
                f"{len(self.readings)} times: once before and once after each timed run "
                "(and never around the warm-up)."
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

    def expect_timed_runs(
        self, what: str, ops: tuple[str, ...], operation: str, dtype: torch.dtype, numel: int
    ) -> None:
        """Check the timeline: at least one ``ops`` operation (the warm-up) before the first
        reading, and exactly one, on ``numel`` elements of ``dtype``, between each start and stop."""
        __tracebackhide__ = True
        events = [e for e in self.timeline if e[0] == "clock" or e[1] in ops]
        readings = [i for i, e in enumerate(events) if e[0] == "clock"]
        if not readings or not any(e[0] == "op" for e in events[: readings[0]]):
            fail(f"{what}: no {operation} before the first clock reading; warm up with an untimed one.")
        for run, (start, stop) in enumerate(zip(readings[::2], readings[1::2], strict=False), start=1):
            inside = events[start + 1 : stop]
            if len(inside) != 1:
                fail(f"{what}: timed run {run} did {len(inside)} {operation}s; time exactly one per run.")
            _, _, op_dtype, op_numel, shape = inside[0]
            if op_dtype != dtype or op_numel != numel:
                fail(
                    f"{what}: timed run {run} did a {operation} of {op_numel} {op_dtype} elements "
                    f"(shape {list(shape)}); it should be of {numel} {dtype} elements."
                )


class _Watching(TorchDispatchMode):
    """Appends each tensor operation (name, dtype, size of its first tensor) to a timeline."""

    def __init__(self, timeline: list[tuple]) -> None:
        super().__init__()
        self.timeline = timeline

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        first = next((a for a in args if isinstance(a, torch.Tensor)), None)
        if first is not None:
            self.timeline.append(
                ("op", func.overloadpacket.__name__, first.dtype, first.numel(), tuple(first.shape))
            )
        return func(*args, **(kwargs or {}))


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
