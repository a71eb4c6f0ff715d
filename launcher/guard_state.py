"""What grading relies on, noted once and compared at every look of the guard (launcher/guard.py).

Noted, by identity (an object may define ``==`` as it likes):

- the functions and classes of the course's packages, torch's and builtins' namespaces, the
  classes' methods, and ``sys.modules``' entries for those modules (a namespace is compared
  whole only once its dict's version shows a change: `dict_version_reader`);
- each function's code, defaults and keyword defaults (a check's tolerance is a default);
- the course's module and class constants (names in capitals: the types a check counts as plain
  tensors, its op tables), their contents included;
- the import system's hooks (``sys.meta_path``, ``sys.path_hooks``), threading's trace and profile
  hooks, and whether a submission tried to add an audit hook;
- torch's state below its Python names: the kernels registered for the operators the checks
  compute with (``torch.library`` can replace them), and the torch-function and dispatch mode
  stacks (a mode entered and never left answers every operation);
- the IPython shell's input transformers, exception handler, cell-running methods and event
  callbacks (a callback a submission registered could read what the kernel runs).
"""

from __future__ import annotations

import contextlib
import functools
import operator
import re
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

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
# The operators the checks compare, count and reduce with: a kernel registered over one of them
# (torch.library's ``Library("aten", "IMPL")``) would change what the checks compute.
WATCHED_OPS = (
    "aten::equal",
    "aten::eq.Tensor",
    "aten::eq.Scalar",
    "aten::ne.Tensor",
    "aten::allclose",
    "aten::isclose",
    "aten::abs",
    "aten::sub.Tensor",
    "aten::add.Tensor",
    "aten::mul.Tensor",
    "aten::div.Tensor",
    "aten::sum",
    "aten::sum.dim_IntList",
    "aten::max",
    "aten::min",
    "aten::all",
    "aten::any",
    "aten::lt.Tensor",
    "aten::le.Tensor",
    "aten::gt.Tensor",
    "aten::ge.Tensor",
    "aten::clone",
    "aten::copy_",
    "aten::_to_copy",
    "aten::_local_scalar_dense",
    "aten::mm",
    "aten::addmm",
    "aten::cat",
    "aten::sort",
    "aten::topk",
    "c10d::allreduce_",
    "c10d::allgather_",
    "c10d::_allgather_base_",
    "c10d::reduce_scatter_",
    "c10d::_reduce_scatter_base_",
    "c10d::broadcast_",
    "c10d::alltoall_base_",
    "c10d::send",
    "c10d::recv_",
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
# What the kernel itself swaps for every request it runs (ipykernel's stdin for ``input``).
SWAPPED = {"builtins.input"}
# What IPython puts in builtins only while it runs a cell (its builtin trap): gone between cells,
# when the guard looks at a test cell's end, and the same object whenever it is there.
TRAPPED = {"builtins.get_ipython"}
CONSTANT = re.compile(r"_*[A-Z][A-Z0-9_]*")

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
SCALARS = (int, float, complex, str, bytes, bool, type(None))


def is_code(value: Any) -> bool:
    # By the value's type alone: reading an attribute of it may run code (or warn).
    return issubclass(type(value), CODE_TYPES)


class Same:
    """A value compared by identity, whatever its ``==`` says."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Same) and other.value is self.value

    def __hash__(self) -> int:
        return id(self.value)


def contents(value: Any, depth: int = 4) -> Any:
    """What ``value`` holds, down to ``depth`` containers, comparable with ``==``: scalars by
    value, containers by what they hold, anything else by identity."""
    kind = type(value)
    if kind in SCALARS:
        return (kind, value)
    if depth and kind in (list, tuple):
        return (kind, tuple(contents(item, depth - 1) for item in value))
    if depth and kind in (set, frozenset):
        return (kind, frozenset(contents(item, depth - 1) for item in value))
    if depth and kind is dict:
        return (kind, tuple((contents(k, depth - 1), contents(v, depth - 1)) for k, v in value.items()))
    return Same(value)


def _function_state(function: types.FunctionType) -> tuple:
    """A function's code, defaults and keyword defaults, by identity, and the defaults' contents
    where they hold something that can change in place (a list, a dict: keyword defaults are one)."""
    defaults, kwdefaults = function.__defaults__, function.__kwdefaults__
    held = (contents(defaults), contents(kwdefaults)) if kwdefaults or _mutable(defaults) else None
    return (function.__code__, defaults, kwdefaults, held)


def _kwdefaults_version(read: Callable[[dict], int] | None, state: tuple) -> int | None:
    """The version of a function's keyword defaults' dict, where that alone tells whether its
    defaults changed in place: none of them, nor its defaults, holds a container."""
    _, defaults, kwdefaults, _ = state
    if read is None or kwdefaults is None or _mutable(defaults) or any(map(_mutable, kwdefaults.values())):
        return None
    return read(kwdefaults)


def _function_changed(function: types.FunctionType, state: tuple) -> bool:
    # Each attribute read here is an audit event the guard's hook sees, so only those that can
    # matter are read: defaults count only for a code with positional parameters, keyword
    # defaults only for one with keyword-only parameters.
    code, defaults, kwdefaults, held = state
    if function.__code__ is not code:
        return True
    if (code.co_argcount or defaults is not None) and function.__defaults__ is not defaults:
        return True
    if (code.co_kwonlyargcount or kwdefaults is not None) and function.__kwdefaults__ is not kwdefaults:
        return True
    return held is not None and (contents(defaults), contents(kwdefaults)) != held


def _mutable(value: Any) -> bool:
    """Whether ``value`` holds, within what `contents` compares, a container that can change in place."""
    kind = type(value)
    if kind in (list, dict, set):
        return True
    return kind in (tuple, frozenset) and any(_mutable(item) for item in value)


def _values(
    namespace: Any, course: bool, name: str, functions: dict[int, tuple]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A namespace's code (by identity) and, for the course's own, its constants' contents; its
    functions' states go into ``functions``, once for each function however many names it has."""
    code = {key: value for key, value in namespace.items() if is_code(value)}
    for key, value in code.items():
        if type(value) is types.FunctionType and id(value) not in functions:
            # (Named where it was defined, if it says: it may be imported under many names.)
            where = getattr(value, "__module__", None)
            named = f"{where}.{value.__qualname__}" if isinstance(where, str) else f"{name}.{key}"
            functions[id(value)] = (named, value, _function_state(value))
    constants = (
        {k: contents(v) for k, v in namespace.items() if not is_code(v) and CONSTANT.fullmatch(k)}
        if course
        else {}
    )
    return code, constants


def note(packages: tuple[str, ...]) -> dict[str, Any]:
    """Note what grading relies on now (see the module's docstring)."""
    modules = {
        name: module
        for name, module in list(sys.modules.items())
        if module is not None and (name in WATCHED_MODULES or name.split(".")[0] in packages)
    }
    # (Read before what they hold: a change made meanwhile then shows as a version unlike this one.)
    read = dict_version_reader()
    versions = {name: read(vars(module)) for name, module in modules.items()} if read else {}
    functions: dict[int, tuple] = {}
    namespaces = {
        name: _values(vars(module), name.split(".")[0] in packages, name, functions)
        for name, module in modules.items()
    }
    classes = {}
    for name, module in modules.items():
        if name.split(".")[0] in packages:
            for value in vars(module).values():
                if isinstance(value, type) and value.__module__ == name:
                    classes[f"{name}.{value.__qualname__}"] = (value, True)
    for module_name, class_name in WATCHED_CLASSES:
        module = sys.modules.get(module_name)
        if module is not None and isinstance(getattr(module, class_name, None), type):
            classes[f"{module_name}.{class_name}"] = (getattr(module, class_name), False)
    return {
        "modules": modules,
        "namespaces": namespaces,
        # Each namespace's version (`dict_version_reader`), where this Python keeps one, and the
        # constants that can still change in place while it stays the same.
        "read_version": read,
        "versions": versions,
        "mutable_constants": {
            name: {key: held for key, held in namespaces[name][1].items() if _mutable(vars(module)[key])}
            for name, module in modules.items()
        },
        "classes": {
            name: (cls, _values(vars(cls), course, name, functions))
            for name, (cls, course) in classes.items()
        },
        "functions": list(functions.values()),
        # Those whose defaults can change in place (a dict of keyword defaults, a list): compared
        # at every look. The rest only once the guard's hook has seen a function's code or
        # defaults set (``object.__setattr__``), or when no hook watches for that.
        "held_functions": [
            (*entry, _kwdefaults_version(read, entry[2]))
            for entry in functions.values()
            if entry[2][3] is not None
        ],
        "function_state_set": True,
        "system": _system_state(),
        "refused_hook": False,  # set when a submission tries to add an audit hook
        "taken": False,  # set when a cell's hidden tests ran before the cell ran them
        "shell": None,  # noted as the first cell starts: the kernel is still setting it up now
        "cell": None,  # the file of the cell last looked at
    }


def _system_state() -> dict[str, Any]:
    import torch

    return {
        "sys.meta_path": contents(sys.meta_path, 1),
        "sys.path_hooks": contents(sys.path_hooks, 1),
        "threading's trace hook": Same(getattr(threading, "_trace_hook", None)),
        "threading's profile hook": Same(getattr(threading, "_profile_hook", None)),
        "torch's function mode stack": torch._C._len_torch_function_stack(),
        "torch's dispatch mode stack": torch._C._len_torch_dispatch_stack(),
        **{f"the kernels registered for {op}": _kernels(torch, op) for op in WATCHED_OPS},
    }


def _kernels(torch: Any, op: str) -> str:
    try:
        return torch._C._dispatch_dump(op)
    except RuntimeError:  # an operator this torch does not have
        return ""


def shell_state() -> dict[str, Any] | None:
    """The IPython shell's state that runs cells and shows their errors, if there is a shell."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
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
        "events": _callbacks(shell),
        # (Where a grading kernel seals each request's hidden tests: launcher/hidden_tests.py.)
        "deserialize": _deserialize(shell),
    }


def _deserialize(shell: Any) -> Any:
    session = getattr(getattr(shell, "kernel", None), "session", None)
    return vars(session).get("deserialize") if session is not None else None


def _callbacks(shell: Any) -> dict[str, list]:
    callbacks = getattr(getattr(shell, "events", None), "callbacks", {})
    return {name: list(found) for name, found in callbacks.items()}


def changes(noted: dict[str, Any], submissions_code: Any) -> list[str]:
    """What was replaced, deleted or added to since it was noted, by name. ``submissions_code``
    tells whether a function is a submission's (an event callback may be the course's own)."""
    changed = []
    read, versions = noted["read_version"], noted["versions"]
    for name, module in noted["modules"].items():
        if sys.modules.get(name) is not module:
            changed.append(f"sys.modules[{name!r}]")
        namespace, values = vars(module), noted["namespaces"][name]
        version = read(namespace) if read is not None else None
        if version is not None and version == versions.get(name):
            # Not one of its names set or deleted since it was last found as noted (a constant
            # may still have changed in place).
            changed += _constant_changes(name, namespace, noted["mutable_constants"][name])
            continue
        found = _namespace_changes(name, namespace, values)
        if not found and version is not None:
            versions[name] = version  # as noted at this version: compared whole again once it changes
        changed += found
    for name, (cls, values) in noted["classes"].items():
        now = vars(cls)
        changed += _namespace_changes(name, now, values)
        changed += [
            f"{name}.{key}" for key in now.keys() - values[0].keys() if is_code(now[key]) and key[:2] != "__"
        ]
    if noted["function_state_set"]:
        functions = noted["functions"]
    else:  # (with its keyword defaults' dict at the version noted, a function's defaults are as noted)
        functions = [
            entry
            for *entry, version in noted["held_functions"]
            if version is None or read(entry[2][2]) != version
        ]
    changed += [
        f"{name}'s code or defaults"
        for name, function, state in functions
        if _function_changed(function, state)
    ]
    system = _system_state()
    changed += [what for what, value in noted["system"].items() if system[what] != value]
    if noted["refused_hook"]:
        changed.append("an audit hook of its own")
    if noted["taken"]:
        changed.append("a test cell's hidden tests, run before the cell ran them")
    if noted["shell"] is not None:
        changed += _shell_changes(noted["shell"], submissions_code)
    return changed


def _namespace_changes(name: str, now: Any, values: tuple[dict, dict]) -> list[str]:
    code, constants = values
    # (Compared in C first: at every look, almost every namespace is unchanged.)
    same = not any(map(operator.is_not, map(now.get, code), code.values()))
    changed = (
        []
        if same
        else [
            f"{name}.{key}"
            for key, value in code.items()
            if now.get(key) is not value
            and f"{name}.{key}" not in SWAPPED
            and not (key not in now and f"{name}.{key}" in TRAPPED)
            and not _torch_wraps(now.get(key), value)
        ]
    )
    return changed + _constant_changes(name, now, constants)


def _constant_changes(name: str, now: Any, constants: dict[str, Any]) -> list[str]:
    return [
        f"{name}.{key}" for key, held in constants.items() if key not in now or contents(now[key]) != held
    ]


def dict_version_reader() -> Callable[[dict], int] | None:
    """How to read a dict's version, if this Python keeps one: CPython (3.10 to 3.13) gives every
    dict a version tag that changes whenever one of its keys is set to another object or deleted
    (PEP 509), at the same place in the dict's memory. A look then compares no further a module's
    namespace whose version is the one it was found unchanged at: most of a look's time, and in a
    rank the memory pages that reading every object would copy out of the fork server (counting
    references writes to them). Read through ctypes, which reads without counting; tried on a
    dict first, and not used where it does not behave so. Code of a submission's cannot write
    memory (the guard refuses ctypes to it)."""
    if sys.implementation.name != "cpython" or not (3, 10) <= sys.version_info[:2] <= (3, 13):
        return None
    try:
        import ctypes
    except ImportError:
        return None
    offset = 3 * ctypes.sizeof(ctypes.c_ssize_t)  # after the reference count, the type and the size

    def read(namespace: dict) -> int:
        return ctypes.c_uint64.from_address(id(namespace) + offset).value

    probe = {"key": object()}
    first = read(probe)
    probe["key"] = object()  # (the size and the keys stay as they were)
    second = read(probe)
    del probe["key"]
    return read if first != second != read(probe) != first else None


def _torch_wraps(new: Any, old: Any) -> bool:
    """Whether ``new`` is torch's own wrapper of ``old`` (torch may wrap its functions later:
    torch._dynamo wraps torch.manual_seed when an optimizer's first step imports it). Its code
    lies in torch's folder, which no submission's code can claim (the guard refuses making
    code under another file's name), and it calls ``old``, whatever it says."""
    from .guard import TORCH

    return (
        isinstance(new, types.FunctionType)
        and getattr(new, "__wrapped__", None) is old
        and new.__code__.co_filename.startswith(TORCH)
        and any(value is old for value in _closed_over(new))
    )


def _closed_over(function: types.FunctionType) -> list[Any]:
    values = []
    for cell in function.__closure__ or ():
        with contextlib.suppress(ValueError):  # a cell not yet filled
            values.append(cell.cell_contents)
    return values


def _same_items(now: Any, noted: list | tuple) -> bool:
    now = list(now)
    return len(now) == len(noted) and all(a is b for a, b in zip(now, noted, strict=True))


def _shell_changes(noted: dict[str, Any], submissions_code: Any) -> list[str]:
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
    if _deserialize(shell) is not noted["deserialize"]:
        changed.append("the kernel's reading of requests")
    # Libraries register callbacks of their own as they are imported (matplotlib's inline
    # backend): only a submission's are tampering.
    for event, callbacks in _callbacks(shell).items():
        added = [c for c in callbacks if not any(c is n for n in noted["events"].get(event, []))]
        if any(submissions_code(callback) for callback in added):
            changed.append(f"the IPython shell's {event} callbacks")
    return changed
