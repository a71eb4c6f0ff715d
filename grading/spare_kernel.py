"""A spare kernel: the next submission's kernel, started while this one's notebook runs.

nbgrader grades one assignment for student after student, and every sandboxed kernel starts
alike (the same sandbox, the same empty folder), so the next kernel can start, and import
torch and the course's packages, on another core while the current notebook runs. Each
notebook still gets a kernel of its own, used once. `SandboxedExecute` starts the spare once
its kernel is ready, and takes it for the next notebook if it was started with the same
settings and the same imports; otherwise it is killed and a kernel started as usual.
"""

from __future__ import annotations

import ast
import atexit
from typing import Any

# What the notebooks' cells import that enters a dispatch mode in the kernel itself (the ranks'
# fork server has done what that first takes ahead already: autograder.comm preloads it).
IN_KERNEL_DISPATCH_MODES = {"FakeClock", "Timeline", "CommLog", "CommDebugMode"}


def import_code(nb: Any) -> str:
    """Code that imports what the notebook's locked cells import (the course's own cells, which
    nbgrader restores before grading). It binds no names: the notebook's own imports still do that.

    A spare kernel runs it first, before grading's guard is installed (grading/sandbox.py): no
    submission's code has run then, nor can it be imported (the kernel's working folder is still
    empty), and imports made under the guard cost more, each of their reads of a function's code
    being an event the guard judges (matplotlib's, as ``visuals`` imports it, took half a second
    of every kernel's CPU)."""
    modules, _ = _course_imports(nb)
    if not modules:
        return ""
    # A module that fails to import here fails in the notebook too, where the student sees why.
    code = f"for _module in {sorted(modules)!r}:\n    try:\n        __import__(_module)\n"
    return code + "    except Exception:\n        pass\ndel _module\n"


def warm_up_code(nb: Any) -> str:
    """Code run once the guard is installed: it starts the launcher's fork server if the locked
    cells import the launcher, and warms the checks up if they import one that needs it."""
    _, names = _course_imports(nb)
    code = ""
    if uses_launcher(nb):
        code += "__import__('launcher.forkserver').forkserver.get_server()\n"
    if names & IN_KERNEL_DISPATCH_MODES:  # (elsewhere it would cost a second of CPU for nothing)
        code += "__import__('autograder.checks').checks.warm_up()\n"
    return code


def uses_launcher(nb: Any) -> bool:
    """Whether the notebook's locked cells import the launcher: its kernel then starts the fork
    server ahead (launcher/kernel.py)."""
    modules, _ = _course_imports(nb)
    return any(m == "launcher" or m.startswith("launcher.") for m in modules)


def _course_imports(nb: Any) -> tuple[dict[str, None], set[str]]:
    """The modules the notebook's locked cells import, and the names they import from them."""
    modules: dict[str, None] = {}
    names: set[str] = set()
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("locked", False):
            for node in ast.walk(_parse(cell.source)):
                if isinstance(node, ast.Import):
                    modules.update(dict.fromkeys(alias.name for alias in node.names))
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    modules.update({node.module: None})
                    names.update(alias.name for alias in node.names)
    return modules, names


def _parse(source: str) -> ast.AST:
    try:
        return ast.parse(source)
    except SyntaxError:  # magics, say: nothing to import in advance
        return ast.Module(body=[], type_ignores=[])


_spare: tuple[tuple, Any] | None = None  # a started kernel, and what it suits


def take(key: tuple) -> Any | None:
    """The spare kernel, if it was started for such a notebook and is still alive."""
    global _spare
    if _spare is None:
        return None
    (spare_key, km), _spare = _spare, None
    process = getattr(km.provisioner, "process", None)
    if spare_key == key and process is not None and process.poll() is None and km.stop_reason is None:
        return km
    km.discard()
    return None


def keep(key: tuple, km: Any) -> None:
    """Keep a started kernel for the next notebook (discarding any kept before)."""
    global _spare
    discard()
    _spare = (key, km)


@atexit.register
def discard() -> None:
    """Kill the spare kernel, if there is one (and at exit: nothing it started outlives grading)."""
    global _spare
    if _spare is not None:
        _spare[1].discard()
        _spare = None
