"""Grading's guard against tampering, by what code does rather than how it is spelled.

Grading installs it in every submission's kernel (grading/sandbox.py starts kernels with
``install("autograder")``) and, through `launch`, in every rank that kernel starts. It is a Python audit
hook (PEP 578), which code cannot remove once added, and it does two things:

- It refuses what only code reaching into other code needs: another frame (``sys._getframe``,
  ``inspect``'s and ``traceback``'s stack functions, a traceback's or generator's frame), every
  object in the interpreter (``gc.get_objects`` and ``get_referrers``), tracing
  (``sys.settrace``, ``sys.setprofile``), ``ctypes``, and making code objects. It refuses them
  only to a submission's own code: a frame in a notebook cell's file, however the call is
  spelled; torch and the course may still do these things.
- It notes what grading relies on when it is installed: the functions and classes of the
  course's packages, of torch's and of builtins, the classes' methods, which modules
  ``sys.modules`` holds for them, and the IPython shell's input transformers and exception
  handlers. As each cell starts, and when a rank's function returns, it compares them: if
  anything was replaced, deleted or added to, the cell (or the rank) fails with
  `TamperingDetected`, so that no test after tampering can pass.

Nothing here runs when you work on a notebook yourself: only grading installs it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import inspect
import os
import pkgutil
import re
import sys
import threading
import traceback
import types
from typing import Any

# A notebook cell's file: ipykernel's (``/tmp/ipykernel_<pid>/<hash>.py``) or IPython's own.
CELL_FILE = re.compile(r"(ipykernel_\d+[/\\]\d+\.py|<ipython-input-[\d-]+-[0-9a-f]+>)$")
# Calls a frame in these modules makes on behalf of its caller (``inspect.currentframe()``).
ON_BEHALF = {inspect.__file__, traceback.__file__}
# Audit events that each of Python 3.10 to 3.13 raises (checked on each); the last is 3.12's.
REFUSED = {
    "sys._getframe",
    "sys._current_frames",
    "sys.settrace",
    "sys.setprofile",
    "gc.get_objects",
    "gc.get_referrers",
    "gc.get_referents",
    "code.__new__",
    "function.__new__",
    "sys.monitoring.register_callback",
}
FRAME_ATTRIBUTES = {"tb_frame", "gi_frame", "cr_frame", "ag_frame", "__code__"}

WATCHED_MODULES = (
    "builtins",
    "math",
    "operator",
    "numpy",
    "torch",
    "torch.testing",
    "torch.nn",
    "torch.nn.functional",
    "torch.autograd",
    "torch.distributed",
    "torch.distributed.distributed_c10d",
)
WATCHED_CLASSES = (
    ("torch", "Tensor"),
    ("torch._C", "TensorBase"),
    ("torch.nn", "Module"),
    ("torch.nn", "Parameter"),
    ("torch.autograd", "Function"),
    ("torch.distributed", "ProcessGroup"),
    ("torch.distributed", "Work"),
)
# The shell's methods through which a cell runs and its errors are shown.
SHELL_METHODS = (
    "run_cell",
    "run_cell_async",
    "run_ast_nodes",
    "run_code",
    "transform_cell",
    "transform_ast",
    "showtraceback",
    "_showtraceback",
    "showsyntaxerror",
)
VERIFY_EVENT = "launcher.guard.verify"
# Where torch's own code lies: torch may wrap its functions later (torch._dynamo wraps
# torch.manual_seed when an optimizer's first step imports it).
TORCH = os.path.dirname(importlib.util.find_spec("torch").origin) + os.sep
# What the kernel itself swaps for every request it runs (ipykernel's stdin for ``input``).
SWAPPED = {"builtins.input"}


class TamperingDetected(RuntimeError):
    """Code changed what grading relies on; the tests after it are not graded automatically."""


class TamperingRefused(RuntimeError):
    """A submission's code tried something only code reaching into other code needs."""


_installed: tuple[str, ...] = ()


def installed() -> tuple[str, ...]:
    """The packages this process guards, if it is guarded (grading's kernels and their ranks
    are); empty if not."""
    return _installed


def install(*packages: str, rank: bool = False) -> None:
    """Guard this process from now on: import ``packages`` (the course's, whose functions the
    checks rely on) whole, note what grading relies on, and add the audit hook. Once only.

    A ``rank`` was forked with them imported already (the kernel's install preloads them into
    the launcher's fork server), and notes them in milliseconds."""
    global _installed
    if _installed:
        return
    packages = tuple(dict.fromkeys(("launcher", *packages)))
    if not rank:
        for package in packages:
            _import_all(package)
        from .forkserver import preload

        preload(*sorted(name for name in sys.modules if name.split(".")[0] in packages))
    noted = _note(packages)
    # Turning the guard off must show too: ranks started after it would not be guarded.
    noted["namespaces"]["launcher.guard"]["_installed"] = packages
    local = threading.local()

    def hook(event: str, args: tuple) -> None:
        if getattr(local, "busy", False):
            return  # the hook's own calls (it reads frames itself)
        local.busy = True
        try:
            _on_event(event, args, noted)
        finally:
            local.busy = False

    sys.addaudithook(hook)
    _installed = packages


def verify() -> None:
    """Raise `TamperingDetected` if what grading relies on changed since `install` (only the
    hook can tell, so this asks it through an audit event)."""
    sys.audit(VERIFY_EVENT)


def _import_all(package: str) -> None:
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, f"{package}."):
        importlib.import_module(info.name)


# -- what grading relies on ------------------------------------------------------------------


CODE_TYPES = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.WrapperDescriptorType,
    types.MethodDescriptorType,
    types.ClassMethodDescriptorType,
    types.GetSetDescriptorType,
    types.MemberDescriptorType,
    property,
    staticmethod,
    classmethod,
    functools.partial,
)


def _is_code(value: Any) -> bool:
    # By the value's type alone: reading an attribute of it may run code (or warn).
    return issubclass(type(value), CODE_TYPES)


def _note(packages: tuple[str, ...]) -> dict[str, Any]:
    modules = {
        name: module
        for name, module in list(sys.modules.items())
        if module is not None and (name in WATCHED_MODULES or name.split(".")[0] in packages)
    }
    namespaces = {name: _code_in(vars(module)) for name, module in modules.items()}
    classes = {}
    for name, module in modules.items():
        if name.split(".")[0] in packages:
            for value in vars(module).values():
                if isinstance(value, type) and value.__module__ == name:
                    classes[f"{name}.{value.__qualname__}"] = value
    for module_name, class_name in WATCHED_CLASSES:
        module = sys.modules.get(module_name)
        if module is not None and isinstance(getattr(module, class_name, None), type):
            classes[f"{module_name}.{class_name}"] = getattr(module, class_name)
    return {
        "modules": modules,
        "namespaces": namespaces,
        "classes": {name: (cls, _code_in(vars(cls))) for name, cls in classes.items()},
        "shell": None,  # noted as the first cell starts: the kernel is still setting it up now
    }


def _code_in(namespace: Any) -> dict[str, Any]:
    return {key: value for key, value in namespace.items() if _is_code(value)}


def _shell() -> Any:
    ipython = sys.modules.get("IPython")
    return ipython.get_ipython() if ipython is not None else None


def _shell_state() -> dict[str, Any] | None:
    shell = _shell()
    if shell is None:
        return None
    return {
        "shell": shell,
        "lists": {
            name: list(getattr(shell, name, []))
            for name in ("input_transformers_cleanup", "input_transformers_post", "ast_transformers")
        },
        "manager": list(getattr(shell.input_transformer_manager, "cleanup_transforms", []))
        + list(getattr(shell.input_transformer_manager, "line_transforms", [])),
        "custom_exceptions": shell.custom_exceptions,
        "CustomTB": shell.CustomTB,
        "class": type(shell),
        "methods": {name: vars(shell)[name] for name in SHELL_METHODS if name in vars(shell)},
    }


def _changes(noted: dict[str, Any]) -> list[str]:
    """What was replaced, deleted or added to since it was noted, by dotted name."""
    changed = []
    for name, module in noted["modules"].items():
        if sys.modules.get(name) is not module:
            changed.append(f"sys.modules[{name!r}]")
        now = vars(module)
        changed += [
            f"{name}.{key}"
            for key, value in noted["namespaces"][name].items()
            if now.get(key) is not value
            and f"{name}.{key}" not in SWAPPED
            and not _torch_wraps(now.get(key), value)
        ]
    for name, (cls, methods) in noted["classes"].items():
        now = vars(cls)
        changed += [f"{name}.{key}" for key, value in methods.items() if now.get(key) is not value]
        changed += [
            f"{name}.{key}" for key in now.keys() - methods.keys() if _is_code(now[key]) and key[:2] != "__"
        ]
    shell = noted["shell"]
    if shell is not None:
        changed += _shell_changes(shell)
    return changed


def _torch_wraps(new: Any, old: Any) -> bool:
    """Whether ``new`` is torch's own wrapper of ``old`` (its code in torch's folder, which no
    submission's code can claim: compiling code under another file's name is refused)."""
    return (
        isinstance(new, types.FunctionType)
        and getattr(new, "__wrapped__", None) is old
        and new.__code__.co_filename.startswith(TORCH)
        and any(value is old for value in _closed_over(new))  # what it calls, not what it says
    )


def _closed_over(function: types.FunctionType) -> list[Any]:
    values = []
    for cell in function.__closure__ or ():
        with contextlib.suppress(ValueError):  # a cell not yet filled
            values.append(cell.cell_contents)
    return values


def _same_items(now: Any, noted: list | tuple) -> bool:
    # By identity: a student's object may define == as it likes.
    now = list(now)
    return len(now) == len(noted) and all(a is b for a, b in zip(now, noted, strict=True))


def _shell_changes(noted: dict[str, Any]) -> list[str]:
    shell, changed = noted["shell"], []
    if type(shell) is not noted["class"]:
        changed.append("the IPython shell's class")
    for name, items in noted["lists"].items():
        if not _same_items(getattr(shell, name, []), items):
            changed.append(f"the IPython shell's {name}")
    manager = shell.input_transformer_manager
    now = list(getattr(manager, "cleanup_transforms", [])) + list(getattr(manager, "line_transforms", []))
    if not _same_items(now, noted["manager"]):
        changed.append("the IPython shell's input transformers")
    same_handler = shell.CustomTB is noted["CustomTB"]
    if not (same_handler and _same_items(shell.custom_exceptions, noted["custom_exceptions"])):
        changed.append("the IPython shell's exception handler")
    now = {name: vars(shell)[name] for name in SHELL_METHODS if name in vars(shell)}
    changed += [f"the IPython shell's {name}" for name in now if now[name] is not noted["methods"].get(name)]
    return changed


# -- the audit hook --------------------------------------------------------------------------


def _on_event(event: str, args: tuple, noted: dict[str, Any]) -> None:
    if event == "exec" and args and isinstance(args[0], types.CodeType):
        if CELL_FILE.search(args[0].co_filename):
            if noted["shell"] is None:
                noted["shell"] = _shell_state()
            _raise_if_changed(noted, "code run before this cell")
        return
    if event == VERIFY_EVENT:
        _raise_if_changed(noted, "code run in this rank")
        return
    refused = event in REFUSED or event.startswith("ctypes.")
    if event == "compile" and len(args) > 1 and isinstance(args[1], str):
        refused = not (args[1].startswith("<") and args[1].endswith(">"))  # a real file's name
    if event == "object.__getattr__":
        refused = len(args) > 1 and args[1] in FRAME_ATTRIBUTES
    if refused and _from_a_cell():
        what = f"{event} ({args[1]})" if event == "object.__getattr__" else event
        raise TamperingRefused(
            f"grading refuses {what} to a submission's code: it reaches into other code's frames "
            "or objects, which no answer needs. Remove it (print an error instead of its traceback)."
        )


def _raise_if_changed(noted: dict[str, Any], who: str) -> None:
    changed = _changes(noted)
    if changed:
        more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
        raise TamperingDetected(
            f"{who} changed what grading relies on ({changed[0]}{more}), so the tests from here on "
            "are not graded automatically: your instructor will look at the notebook."
        )


def _from_a_cell() -> bool:
    """Whether the code that caused the event is a submission's: the first frame outside this
    hook, outside code that acts on its caller's behalf (inspect, traceback) and outside code
    made from a string (``exec``), that lies in a notebook cell's file."""
    frame = sys._getframe(3)  # (this function's, _on_event's and the hook's own frames skipped)
    while frame is not None:
        filename = frame.f_code.co_filename
        if CELL_FILE.search(filename):
            return True
        # ("<frozen importlib._bootstrap>" is the standard library's own: imports compile there)
        made_from_a_string = filename.startswith("<") and filename.endswith(">") and "frozen" not in filename
        if not (made_from_a_string or filename in ON_BEHALF):
            return False
        frame = frame.f_back
    return False
