"""Comparing a student's answer with the right one: numbers, values, tensors, worked problems.

Every check raises `CheckFailed` (an AssertionError, so nbgrader counts it as a failed test)
with a message a student can act on. Where a wrong answer is typical, the test passes it in
``mistakes`` and the message names the mistake instead of only the numbers. Values are compared
by exact type and with functions taken at import, never through an object's own ``__eq__``.
"""

from __future__ import annotations

import math
import sys
from typing import Any, NoReturn

import torch

# Taken when this module is imported, before any student code runs: a notebook that replaces
# torch.allclose or torch.equal (in the kernel, or inside a rank) cannot change what checks see.
allclose = torch.allclose
tensors_equal = torch.equal


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


# The tensor types a check compares: a subclass may define __torch_function__ and make
# torch.equal or allclose say whatever it likes. (A Parameter turns that off.)
PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)


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
        return type(actual) in PLAIN_TENSORS and _same(actual, expected, exact=True)
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
    if type(actual) not in PLAIN_TENSORS:
        fail(
            f"{what}: expected a torch.Tensor, got {type(actual).__name__}, a subclass of it, which can "
            "change what comparing it does: return a plain tensor (x.as_subclass(torch.Tensor))."
        )
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


def counted(n: int, noun: str) -> str:
    """``"1 rank"``, ``"3 ranks"``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


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


def expect_worked_answer(
    actual: Any, expected: float, what: str, hint: str, mistakes: dict | None = None, *, whole: bool = False
) -> None:
    """A worked problem's answer, for a hidden test: within 1%, or with ``whole`` exactly that whole
    number (an int, or a float with nothing after the point). A wrong answer is told the mistake it
    looks like, where it looks like a known one, and ``hint``, where to look: never the answer nor
    how it is reached, which a student shown the feedback before the deadline could copy."""
    __tracebackhide__ = True
    number = plain_number(actual)
    if number is None or type(number) is bool or not math.isfinite(number):
        fail(f"{what}: expected {'a whole number' if whole else 'a number'}, got {_short(actual)}.")
    if whole and float(number) != int(number):
        fail(f"{what} = {number!r} is not a whole number; the question asks for a count.")
    number = int(number) if whole else float(number)

    def matches(value: float) -> bool:
        return number == value if whole else math.isclose(number, value, rel_tol=0.01)

    if matches(expected):
        return
    message = f"{what} = {number:.4g} is not the answer."
    for mistake, value in (mistakes or {}).items():
        if matches(value):
            message += f" That is what you get if you {mistake}."
            break
    fail(f"{message} {hint}")


def expect_between(value: Any, low: float, high: float, what: str, why: str) -> None:
    """A worked problem's visible test: not the answer, only the range any reasonable answer falls
    in, and ``why``, so that a slip of units or of a factor of the world size shows at once."""
    __tracebackhide__ = True
    number = plain_number(value)
    if number is None or type(number) is bool or not math.isfinite(number):
        fail(f"{what}: expected a number, got {_short(value)}.")
    if not low <= number <= high:
        fail(
            f"{what} = {number:.4g} is outside the range any right answer falls in "
            f"({low:.3g} to {high:.3g}): {why}"
        )
