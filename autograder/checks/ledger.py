"""Where a check keeps its record of what a student's code did, out of that code's reach.

A check hands objects to the code it tests: a fake clock, whose readings and timeline it then
reads back. Kept as the object's own lists, they could be rewritten by the code they judge
(``clock.calls = 2``). So a check records into a ledger instead: one generator, whose records
live in its frame (which grading's guard lets no submission reach, launcher/guard.py), and which
adds to a record only for the course's own code, the functions it is called from. Anyone may
read a record; nothing but the course's code can add to it, and nothing can change or remove
what it holds. The owner (the clock) is named by its identity, which no code can change, and
its record is dropped when the owner is.
"""

from __future__ import annotations

import contextlib
import os
import sys
import weakref
from collections.abc import Generator
from typing import Any

# The course's checks: the only code that may add to a record.
CHECKS = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_HERE = __file__  # (a module's __file__ could be rebound; a constant's change, the guard sees)


def _vault() -> Generator[Any, tuple, None]:
    records: dict[int, tuple[tuple, list]] = {}
    answer = None
    while True:
        request = yield answer
        answer = None
        action, key, value = request
        # Frame 1 must be this module's function that sent the request, and frame 2 its caller.
        sender = sys._getframe(1)
        ours = sender.f_code.co_filename == _HERE
        if action == "read":
            fixed, entries = records.get(key, ((), []))
            answer = (fixed, tuple(entries))
        elif action == "drop" and ours:
            records.pop(key, None)
        elif ours and sender.f_back is not None and sender.f_back.f_code.co_filename.startswith(CHECKS):
            if action == "keep":
                records[key] = (tuple(value), [])
            elif action == "add" and key in records:
                records[key][1].append(value)


_VAULT = _vault()
next(_VAULT)


def keep(owner: object, fixed: tuple = ()) -> None:
    """Start a record for ``owner`` (it must allow weak references), with ``fixed`` values the
    owner reads from it (a clock's readings)."""
    _VAULT.send(("keep", id(owner), fixed))
    weakref.finalize(owner, _drop, id(owner))


def add(owner: object, entry: Any) -> None:
    """Add ``entry`` to ``owner``'s record (only the course's checks can)."""
    _VAULT.send(("add", id(owner), entry))


def read(owner: object) -> tuple[tuple, tuple]:
    """``owner``'s fixed values and its entries so far."""
    return _VAULT.send(("read", id(owner), None))


def _drop(key: int) -> None:
    # (Run by the garbage collector, which may find the owner gone while the ledger is busy:
    # then its record stays, a small leak, rather than an error in unrelated code.)
    with contextlib.suppress(ValueError):
        _VAULT.send(("drop", key, None))
