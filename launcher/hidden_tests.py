"""A test cell's hidden tests, run in a grading kernel where the submission cannot read them.

The grader (grading/hidden_tests.py) never sends a hidden test as a cell's code: IPython would
keep it where any code can read it (``In``, the line cache, the history, the callbacks a cell's
source is handed to, the request ``kernel.get_parent()`` returns). It sends the test cell as
the student's release shows it, with each hidden region replaced by a call of `run`, and the
hidden regions themselves in the request's metadata. As the kernel reads the
request, before anything else sees it, the regions are sealed (`receive_from_the_grader`): a
generator holds them, and hands them only to `run`, one at a time, once. `run` compiles each
under a file name no line cache knows and runs it in a copy of the notebook's namespace, so
that the names a hidden test binds (an expected value, a loop's case) are not left behind.

So a submission's code sees no hidden test's source: not before its cell runs, not while its
functions are called by the test, not after. If it calls `run` itself, or reaches the seal,
the hidden tests it took are gone, and the cell's own call fails with `TamperingDetected`.
What is only made hard: code that gets a frame of the running test (the guard refuses every
way it knows), or that reads the interpreter's memory (``ctypes``, refused too).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from typing import Any

# What the grader's request carries the hidden regions in (grading/hidden_tests.py sends them).
METADATA_KEY = "course_hidden_tests"
# The file name hidden tests run under: no line cache holds it, so no traceback quotes them.
HIDDEN_FILE = "<hidden test>"


def receive_from_the_grader() -> None:
    """In a grading kernel, before any submission's code runs: seal the hidden regions of each
    request as the kernel reads it (nothing to do outside a kernel)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    session = getattr(getattr(shell, "kernel", None), "session", None)
    if session is None:
        return
    read = session.deserialize

    def deserialize(*args: Any, **kwargs: Any) -> dict:
        message = read(*args, **kwargs)
        metadata = message.get("metadata") if isinstance(message, dict) else None
        if isinstance(metadata, dict) and METADATA_KEY in metadata:
            # (The namespace the regions share is filled from the notebook's as each one runs.)
            metadata[METADATA_KEY] = _seal(metadata[METADATA_KEY], {})
        return message

    session.deserialize = deserialize


def _seal(regions: Any, namespace: dict) -> Iterator[tuple[str, dict]]:
    """A generator that gives ``regions`` one at a time, each with the namespace they share, to
    `run` only: to any other caller it gives nothing, and is spent."""
    from .guard import TamperingRefused

    for region in regions if isinstance(regions, list) else []:
        if sys._getframe(1).f_code is not _RUN_CODE:
            raise TamperingRefused("the hidden tests are run by the grader only")
        yield str(region), namespace


def run() -> None:
    """Run this cell's next hidden region (the grader's code calls this; see the module)."""
    from .guard import TAKEN_EVENT, TamperingDetected

    ipython = sys.modules["IPython"]
    shell = ipython.get_ipython()
    parent = shell.kernel.get_parent("shell") if shell is not None else {}
    seal = (parent.get("metadata") or {}).get(METADATA_KEY)
    if type(seal) is not types.GeneratorType:
        sys.audit(TAKEN_EVENT)  # (the guard flags the notebook from now on)
        raise TamperingDetected(
            "the hidden tests of this cell did not arrive as the grader sent them, so they are not "
            "graded automatically: your instructor will look at the notebook."
        )
    try:
        source, namespace = next(seal)
    except (StopIteration, RuntimeError) as error:
        sys.audit(TAKEN_EVENT)
        raise TamperingDetected(
            "the hidden tests of this cell were taken before it ran them, so they are not graded "
            "automatically: your instructor will look at the notebook."
        ) from error
    namespace.update(shell.user_ns)
    code = compile(source, HIDDEN_FILE, "exec")
    del source
    exec(code, namespace)  # noqa: S102 - the grader's own hidden tests


_RUN_CODE = run.__code__
