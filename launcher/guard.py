"""Grading's guard against tampering, by what code does rather than how it is spelled.

Grading installs it in every submission's kernel (grading/sandbox.py starts kernels with
``install("autograder")``) and, through `launch`, in every rank that kernel starts. It is a Python audit
hook (PEP 578), which code cannot remove once added, and it does two things:

- It refuses what only code reaching into other code needs: another frame (``sys._getframe``,
  a traceback's or generator's frame, a function's code), every object in the interpreter
  (``gc``), tracing and profiling, ``ctypes``, making code objects (``marshal`` included) or code
  under a library's file name, and adding an audit hook. Who asks decides, by an allow-list:
  the course's packages and torch may; the standard library and the installed libraries act on
  their caller's behalf, so the first frame above them decides, except for the few of their
  functions that use a frame only for themselves (logging finding its caller, say); anything
  else (a notebook cell, a module the submission wrote, code it made from a string) is refused.
- It notes what grading relies on when it is installed (launcher/guard_state.py) and, as each
  cell starts, after each test cell and when a rank's function returns, compares: if anything
  was replaced, deleted or added to, the cell (or the rank) fails with `TamperingDetected`, so
  that no test after tampering can pass.

Nothing here runs when you work on a notebook yourself: only grading installs it.
"""

from __future__ import annotations

import contextlib
import hmac
import importlib
import importlib.util
import os
import pkgutil
import re
import sys
import sysconfig
import threading
import types
from typing import Any

from . import guard_state

# A notebook cell's file: ipykernel's (``/tmp/ipykernel_<pid>/<hash>.py``) or IPython's own.
CELL_FILE = re.compile(r"(ipykernel_\d+[/\\]\d+\.py|<ipython-input-[\d-]+-[0-9a-f]+>)$")
# Audit events refused to a submission (each of Python 3.10 to 3.13 raises them; the last is 3.12's).
REFUSED = {
    "sys._getframe",
    "sys._current_frames",
    "sys.settrace",
    "sys.setprofile",
    "sys.addaudithook",
    "gc.get_objects",
    "gc.get_referrers",
    "gc.get_referents",
    "code.__new__",
    "function.__new__",
    "marshal.loads",
    "marshal.load",
    "sys.monitoring.register_callback",
}
FUNCTION_STATE = {"__code__", "__defaults__", "__kwdefaults__"}
FRAME_ATTRIBUTES = {"tb_frame", "gi_frame", "cr_frame", "ag_frame", "__code__"}
VERIFY_EVENT = "launcher.guard.verify"
# The grader asks for a proof that a test cell ran in the guarded kernel, after the cell: a
# keyed hash of a fresh word (see `install`); a kernel made to skip cells cannot give it.
PROVE_EVENT = "launcher.guard.prove"
KEY_FILE = "COURSE_GUARD_KEY_FILE"  # the environment variable naming the key's file
TAKEN_EVENT = "launcher.hidden_tests.taken"  # a cell's hidden tests, run before the cell ran them

# Who may ask: the course's packages and torch. (Where torch's own code lies matters also
# because torch may wrap its functions later: torch._dynamo wraps torch.manual_seed.)
TORCH = os.path.dirname(importlib.util.find_spec("torch").origin) + os.sep
COURSE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
TRUSTED = (TORCH, *(f"{COURSE}{package}{os.sep}" for package in ("launcher", "autograder", "visuals")))


def _library_folders() -> tuple[str, ...]:
    """Where the standard library and the installed libraries lie: Python's own folders, and
    every folder a module imported so far (before any submission's code runs) was found in
    (an environment may reach its packages through a .pth file), but the course's own and the
    working folder, where a submission's files are."""
    paths = sysconfig.get_paths()
    folders = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if paths.get(key)}
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or name == "__main__":
            continue
        path = os.path.abspath(path)
        folder = path
        for _ in range(name.count(".") + 1 + (os.path.basename(path).startswith("__init__."))):
            folder = os.path.dirname(folder)
        # (Only where the module's top-level name lies: an alias, ``os.path`` say, is not.)
        if path.startswith(os.path.join(folder, name.split(".")[0])):
            folders.add(folder)
    folders = {os.path.join(folder, "") for folder in folders}
    folders -= {COURSE, os.path.join(os.getcwd(), "")}
    return tuple(sorted(folders))


# Code that acts on its caller's behalf: the standard library and the installed libraries.
LIBRARIES = _library_folders()
# The code on the stack when the guard was installed: the process's own start (a kernel started
# by ``python -c``, say), which acts for no submission.
_STARTUP: frozenset[types.CodeType] = frozenset()
# Functions of theirs that use a frame, or make code, only for themselves (None: to read the
# caller's module name, or to warn), and those that hand on what they took ("caller": IPython
# gives a magic its caller's variables), which may take no frame further up than the code that
# called them, else a submission could have them take the frame of a check that called it.
PRIVATE_USERS: dict[tuple[str, str], str | None] = {
    ("logging/__init__.py", "Logger.findCaller"): None,
    ("logging/__init__.py", "Handler.handleError"): None,  # (it prints a failed record's traceback)
    ("warnings.py", "warn"): None,
    ("collections/__init__.py", "namedtuple"): None,
    ("enum.py", "EnumType._create_"): None,
    ("gettext.py", "_as_int"): None,
    ("subprocess.py", "_text_encoding"): None,
    ("typing.py", "_caller"): None,
    ("typing_extensions.py", "_caller"): None,
    ("typing_extensions.py", "_has_generic_or_protocol_as_origin"): None,
    ("matplotlib/_api/__init__.py", "warn_external"): None,
    ("traitlets/traitlets.py", "TraitType.__init__"): None,
    ("ipywidgets/widgets/utils.py", "deprecation"): None,
    ("ipywidgets/widgets/widget.py", "*"): None,
    ("IPython/core/magic.py", "*"): None,
    ("IPython/core/interactiveshell.py", "InteractiveShell.run_line_magic"): "caller",
    ("IPython/core/interactiveshell.py", "InteractiveShell.run_cell_magic"): "caller",
    ("IPython/core/interactiveshell.py", "InteractiveShell.var_expand"): "caller",
    ("IPython/core/interactiveshell.py", "InteractiveShell.push"): "caller",
    # importlib loading a module from its source (the code it makes carries that file's name)
    ("<frozen importlib._bootstrap_external>", "SourceLoader.get_code"): None,
}


class TamperingDetected(RuntimeError):
    """Code changed what grading relies on; the tests after it are not graded automatically."""


class TamperingRefused(RuntimeError):
    """A submission's code tried something only code reaching into other code needs."""


class GuardProof(Exception):  # noqa: N818 - not an error: how the proof leaves the audit hook
    """Raised by the guard's hook for the grader's proof event: its message is the proof."""


_installed: tuple[str, ...] = ()


def installed() -> tuple[str, ...]:
    """The packages this process guards, if it is guarded (grading's kernels and their ranks
    are); empty if not."""
    return _installed


def install(*packages: str, rank: bool = False) -> None:
    """Guard this process from now on: import ``packages`` (the course's, whose functions the
    checks rely on) whole, note what grading relies on, and add the audit hook. Once only.

    A ``rank`` was forked with them imported already (the kernel's install preloads them into
    the launcher's fork server), and notes them in milliseconds. In the kernel, the fork server
    is fixed from now on (launcher/forkserver.py): started from the environment the kernel has
    now, never restarted, importing only the course's and torch's modules; and each request's
    hidden tests are sealed as the kernel reads it (launcher/hidden_tests.py).

    A grading kernel is started with ``COURSE_GUARD_KEY_FILE`` naming a file that holds a key
    only the grader and this hook know: it is read and deleted here, before any submission's
    code, and kept in the hook's closure alone, which no Python code can reach (frames, ``gc``
    and ``ctypes`` are refused). After each test cell the grader sends a fresh word; the hook
    answers with its keyed hash, after comparing what grading relies on. So a kernel whose
    cells were made to run nothing (its shell's ``run_cell`` replaced, say) cannot pass a test."""
    global _installed, _STARTUP, _baseline
    if _installed:
        return
    packages = tuple(dict.fromkeys(("launcher", *packages)))
    if rank and _baseline is not None and set(packages) <= set(_baseline[0]):
        # The fork server's, taken before any submission's code ran; from now on held by the
        # hook alone (code in this rank could otherwise rewrite what it is compared with).
        noted, _baseline = _baseline[1], None
    elif rank:
        noted = guard_state.note(packages)
    if not rank:
        _STARTUP = frozenset(_codes_on_the_stack())
        for package in packages:
            _import_all(package)
        from . import forkserver, hidden_tests

        forkserver.fix(allowed=server_packages(*packages))
        forkserver.preload(*sorted(name for name in sys.modules if name.split(".")[0] in packages))
        hidden_tests.receive_from_the_grader()
        noted = guard_state.note(packages)
    # Turning the guard off must show too: ranks started after it would not be guarded.
    noted["namespaces"]["launcher.guard"][0]["_installed"] = packages
    noted["kinds"] = {}  # what each code object on a walked stack is (`_kind`)
    local = threading.local()
    key = None if rank else _take_key()

    def hook(event: str, args: tuple) -> None:
        if event == "object.__getattr__" and args[1] not in FRAME_ATTRIBUTES:
            return  # (the most frequent event by far: a function's defaults read, say)
        if getattr(local, "busy", False):
            return  # the hook's own calls (it reads frames itself)
        local.busy = True
        try:
            if event == PROVE_EVENT and key is not None and args and isinstance(args[0], str):
                _raise_if_changed(noted, "code this test ran")
                raise GuardProof(hmac.new(key, args[0].encode(), "sha256").hexdigest())
            _on_event(event, args, noted)
        finally:
            local.busy = False

    sys.addaudithook(hook)
    noted["function_state_set"] = False  # (from now on the hook sees it set: `_on_event`)
    _installed = packages


def server_packages(*packages: str) -> tuple[str, ...]:
    """The packages a guarded kernel's fork server imports from (`forkserver.fix`): torch's,
    numpy's, the figures' and the launcher's, and the guarded ``packages``."""
    return ("torch", "numpy", "visuals", *dict.fromkeys(("launcher", *packages)))


# In the fork server, when grading: what grading relies on, noted once there (and again after
# each preload), so that every rank it forks starts with it rather than noting it again.
_baseline: tuple[tuple[str, ...], dict[str, Any]] | None = None


def note_for_ranks(packages: tuple[str, ...]) -> None:
    """In the fork server: note what grading relies on, for the ranks it will fork."""
    global _baseline
    packages = tuple(dict.fromkeys(("launcher", *packages)))
    _baseline = (packages, guard_state.note(packages))


def _take_key() -> bytes | None:
    """The grader's key, from the file ``COURSE_GUARD_KEY_FILE`` names, which is then deleted."""
    path = os.environ.pop(KEY_FILE, "")
    if not path:
        return None
    try:
        with open(path, "rb") as file:
            key = file.read()
    finally:
        with contextlib.suppress(OSError):
            os.remove(path)
    return key or None


def _codes_on_the_stack() -> list[types.CodeType]:
    codes, frame = [], sys._getframe(1)
    while frame is not None:
        codes.append(frame.f_code)
        frame = frame.f_back
    return codes


def verify() -> None:
    """Raise `TamperingDetected` if what grading relies on changed since `install` (only the
    hook can tell, so this asks it through an audit event)."""
    sys.audit(VERIFY_EVENT)


def _import_all(package: str) -> None:
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, f"{package}."):
        importlib.import_module(info.name)


# -- the audit hook --------------------------------------------------------------------------


def _on_event(event: str, args: tuple, noted: dict[str, Any]) -> None:
    if event == "object.__setattr__" and len(args) > 1 and args[1] in FUNCTION_STATE:
        # Setting a function's code or defaults is the one way to change them other than in
        # place (`guard_state.changes` compares those held in place at every look). Deleting
        # defaults raises no event, but only makes calls that relied on them fail.
        noted["function_state_set"] = True
    if event == "exec" and args and isinstance(args[0], types.CodeType):
        filename = args[0].co_filename
        # Once a cell (IPython runs a cell's statements one by one, each from the cell's file,
        # which is new for every cell run).
        if filename != noted["cell"] and CELL_FILE.search(filename):
            noted["cell"] = filename
            if noted["shell"] is None:
                noted["shell"] = guard_state.shell_state()
            _raise_if_changed(noted, "code run before this cell")
        return
    if event == VERIFY_EVENT:
        _raise_if_changed(noted, "code run in this rank")
        return
    if event == TAKEN_EVENT:
        noted["taken"] = True
        return
    refused = event in REFUSED or event.startswith("ctypes.")
    if event == "compile" and len(args) > 1 and isinstance(args[1], str):
        refused = args[1].startswith((*TRUSTED, *LIBRARIES))  # code claiming a library's file
    if event == "object.__getattr__":
        refused = len(args) > 1 and args[1] in FRAME_ATTRIBUTES
    if not refused:
        return
    # Tracing set up in a thread the submission started (``threading.settrace``) has no caller.
    alone = event in ("sys.settrace", "sys.setprofile")
    taken = args[0] if event == "sys._getframe" and args and isinstance(args[0], types.FrameType) else None
    if _asked_by_a_submission(sys._getframe(2), alone, taken, noted["kinds"]):
        if event == "sys.addaudithook":
            noted["refused_hook"] = True  # (Python drops the hook and this error silently)
        what = f"{event} ({args[1]})" if event == "object.__getattr__" else event
        raise TamperingRefused(
            f"grading refuses {what} to a submission's code: it reaches into other code's frames "
            "or objects, which no answer needs. Remove it (print an error instead of its traceback)."
        )


def _raise_if_changed(noted: dict[str, Any], who: str) -> None:
    changed = guard_state.changes(noted, submissions_code)
    if changed:
        more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
        raise TamperingDetected(
            f"{who} changed what grading relies on ({changed[0]}{more}), so the tests from here on "
            "are not graded automatically: your instructor will look at the notebook."
        )


def _asked_by_a_submission(
    frame: types.FrameType | None,
    alone: bool = False,
    taken: types.FrameType | None = None,
    kinds: dict[types.CodeType, Any] | None = None,
) -> bool:
    """Whether the code that caused an event is a submission's: walking out from ``frame`` (the
    one that caused it), past the libraries acting on their caller's behalf, the first frame that
    is not theirs decides. The course's and torch's, or a library function using a frame for
    itself (``taken``, the frame it takes, no further up than its caller: `_within_reach`), may; any
    other (a cell's, a module's the submission wrote, code made from a string) may not. Reaching
    the bottom, only the kernel's own machinery asked (unless ``alone``). ``kinds`` caches `_kind`
    (the hook's own, which no other code can reach)."""
    kinds = {} if kinds is None else kinds
    while frame is not None:
        code = frame.f_code
        kind = kinds.get(code)
        if kind is None:
            kind = kinds[code] = _kind(code)
        if kind is TRUSTED_CODE:
            return False
        if isinstance(kind, tuple):  # a library's function using a frame for itself
            return PRIVATE_USERS[kind] is not None and taken is not None and not _within_reach(frame, taken)
        if alone and code.co_filename == threading.__file__ and code.co_name == "_bootstrap_inner":
            return True
        if not (kind is LIBRARY_CODE or code in _STARTUP):
            return True
        frame = frame.f_back
    return alone


# What the code of a frame is, for `_asked_by_a_submission`, found once for each code object
# (the guard walks the same library frames over and over: cloudpickle reading functions' code
# for every launch, say). Code objects cannot change, and each holds its file name.
TRUSTED_CODE, LIBRARY_CODE, OTHER_CODE = "trusted", "library", "other"


def _kind(code: types.CodeType) -> Any:
    """TRUSTED_CODE, a PRIVATE_USERS key, LIBRARY_CODE or OTHER_CODE."""
    filename = code.co_filename
    if filename.startswith(TRUSTED):
        return TRUSTED_CODE
    user = _private_user(filename, code)
    if user is not None:
        return user
    if filename.startswith(LIBRARIES) or filename.startswith("<frozen "):
        return LIBRARY_CODE
    return OTHER_CODE


def _private_user(filename: str, code: types.CodeType) -> tuple[str, str] | None:
    qualname = getattr(code, "co_qualname", None)  # (Python 3.10 has only the short name)
    for path, function in PRIVATE_USERS:
        if filename.endswith(path) and (
            function in ("*", qualname) or (qualname is None and function.rsplit(".", 1)[-1] == code.co_name)
        ):
            return path, function
    return None


def _within_reach(frame: types.FrameType, taken: types.FrameType) -> bool:
    """Whether ``taken`` lies between ``frame`` and the first frame above it that is not a
    library's (the code that called the library), both included."""
    while frame is not None:
        if frame is taken:
            return True
        code = frame.f_code
        if not (code.co_filename.startswith((*LIBRARIES, "<frozen ")) or code in _STARTUP):
            return False
        frame = frame.f_back
    return False


def submissions_code(function: Any) -> bool:
    """Whether ``function`` is a submission's: its code lies outside the course, torch and the
    installed libraries."""
    code = getattr(getattr(function, "__func__", function), "__code__", None)
    if not isinstance(code, types.CodeType):
        return False  # a builtin, or a class's instance: not code a submission wrote
    filename = code.co_filename
    return not (filename.startswith((*TRUSTED, *LIBRARIES)) or filename.startswith("<frozen "))
