"""Checks of answers that are not code: a choice among lettered statements, the numbers of
worked problems (a sanity range for the visible test), and predictions that may rest on an
earlier answer of the student's."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from typing import Any

import torch

from ..checks import expect_close, fail, plain_number


def chosen_letters(answer: Any, options: str, what: str) -> frozenset[str]:
    """The letters an answer chose, from a set, list or tuple of letters, or a string of them."""
    __tracebackhide__ = True
    items = list(answer) if type(answer) in (set, frozenset, list, tuple, str) else None
    if items is None or not all(type(item) is str for item in items):
        fail(
            f"{what}: expected a set of letters such as {{'{options[0]}', '{options[-1]}'}}, "
            f"got {answer!r:.120}."
        )
    given = [item.strip() for item in items if item.strip() not in ("", ",")]
    unknown = [item for item in given if len(item) != 1 or item.upper() not in options]
    if unknown:
        fail(f"{what}: {unknown[0]!r} is not one of the statements' letters, {', '.join(options)}.")
    return frozenset(item.upper() for item in given)


def check_choices(answer: Any, right: Collection[str], options: str, what: str, kind: str, hint: str) -> None:
    """The letters chosen must be exactly ``right``, the statements that are a ``kind`` ("flaw").
    The message says whether a wrong statement was chosen or a right one left out, not which."""
    __tracebackhide__ = True
    letters = chosen_letters(answer, options, what)
    wrong, missing = letters - set(right), set(right) - letters
    if wrong or missing:
        parts = []
        if wrong:
            chose = "a statement that is" if len(wrong) == 1 else "statements that are"
            parts.append(f"you chose {chose} not a {kind}")
        if missing:
            parts.append(f"you left out {'a' if len(missing) == 1 else 'more than one'} {kind}")
        fail(f"{what}: {' and '.join(parts)}. {hint}")


def busbw_from_your_bandwidths(
    bandwidths: Callable, name: str, size_bytes: int, world_size: int, seconds: float
) -> float | None:
    """What the student's own ``bandwidths`` gives as the busbw of the collective ``name`` whose whole
    array is ``size_bytes`` of float32, when a call takes ``seconds``; None where it cannot say."""
    each_input = size_bytes // 4 // (world_size if name in ("all_gather", "gather") else 1)
    try:
        return plain_number(bandwidths(name, each_input, torch.float32, seconds, world_size)[1])
    except Exception:  # noqa: BLE001 - an unsolved or broken exercise 1 is graded there, not here
        return None


def expect_prediction(
    actual: Any, expected: float, what: str, *, yours: float | None = None, mistakes: dict | None = None
) -> None:
    """A prediction that the student may build on an earlier answer of theirs: right, or equal to
    ``yours``, what their earlier answer gives for the right inputs. A slip in the earlier exercise
    then costs points there only, not twice."""
    __tracebackhide__ = True
    number = plain_number(actual)
    if yours is not None and number is not None and math.isclose(number, yours, rel_tol=1e-6):
        return
    expect_close(actual, expected, what, mistakes=mistakes)
