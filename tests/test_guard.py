"""Grading's guard (launcher/guard.py), piece by piece: who may reach frames and make code, what it
notes below the names, the hidden tests' path, the fork server it fixes, and the records checks
keep out of a submission's reach. (tests/test_sandbox.py grades whole hostile submissions.)"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from course import ASSIGNMENTS, REPO, is_test, notebook_path, read

from grading.hidden_tests import BEGIN, CALL, METADATA_KEY, split

# A notebook cell's file name, as ipykernel gives it: code compiled under it is a submission's.
CELL = "/tmp/ipykernel_7/123.py"


def run_guarded(script: str) -> list[str]:
    """Run ``script`` in a process of its own with the guard installed (an audit hook stays for
    the process's life); ``cell(code)`` runs code as a notebook cell would. Its printed lines."""
    prelude = (
        "import sys\n"
        "from launcher import guard\n"
        "guard.install('autograder')\n"
        "space = {'__name__': '__main__'}\n"
        "cells = iter(range(1000))\n"
        "def cell(code):\n"
        "    try:\n"
        # (Each cell run has a file of its own, as in a kernel: the guard looks once a cell.)
        "        exec(compile(code, f'/tmp/ipykernel_7/{next(cells)}.py', 'exec'), space)\n"
        "        return 'ran'\n"
        "    except Exception as error:\n"
        "        return f'{type(error).__name__}: {error}'[:160]\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", prelude + script], capture_output=True, text=True, timeout=300, cwd=REPO
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.splitlines()


REFUSED = {
    "logging's frame": "import logging\nlogging.currentframe()",
    "IPython's frame helper": "from IPython.utils import frame\nframe.extract_module_locals(0)",
    "a debugger's tracing": "import bdb\nbdb.Bdb().set_trace()",
    "marshal": "import marshal\nmarshal.loads(marshal.dumps(1))",
    "code claiming torch's file": "import torch\ncompile('x = 1', torch.__file__, 'exec')",
    "a function's code": "(lambda: 0).__code__",
    "an exec'd function's frame": "exec('import sys\\nsys._getframe(0)')",
    "gc": "import gc\ngc.get_referrers(sys)",
}
ALLOWED = {
    "namedtuple": "import collections\ncollections.namedtuple('P', 'x y')(1, 2)",
    "an enum": "import enum\nenum.Enum('Colour', 'RED GREEN')",
    "a typing generic": "import typing\nT = typing.TypeVar('T')\nclass Box(typing.Generic[T]):\n    pass",
    "a warning": "import warnings\nwarnings.warn('careful', stacklevel=2)",
    "logging": "import logging\nlogging.getLogger('x').warning('logged')",
    "exec of plain code": "exec('y = 2')",
    "an import": "import json, fractions",
}


def test_frames_and_code_are_refused_to_a_submission_by_allow_list(tmp_path) -> None:
    (tmp_path / "spy.py").write_text("import sys\n\ndef caller():\n    return sys._getframe(1)\n")
    cells = {
        **REFUSED,
        **ALLOWED,
        # a module the submission wrote is the submission's; the course's own code may read frames
        "a module it wrote": f"sys.path.insert(0, {str(tmp_path)!r})\nimport spy\nspy.caller()",
        "the course's code": "import autograder.checks.ledger as ledger\nledger.read(object())",
        # last: an audit hook refused (silently, as Python does) is flagged from then on
        "an audit hook": "sys.addaudithook(lambda event, args: None)",
        "after the hook": "x = 1",
    }
    script = "".join(f"print({name!r}, '|', cell({code!r}))\n" for name, code in cells.items())
    said = dict(line.split(" | ", 1) for line in run_guarded(script) if " | " in line)
    for name in [*REFUSED, "a module it wrote"]:
        assert said[name].startswith("TamperingRefused"), (name, said[name])
    for name in [*ALLOWED, "the course's code", "an audit hook"]:
        assert said[name] == "ran", (name, said[name])
    after = said["after the hook"]
    assert after.startswith("TamperingDetected") and "an audit hook of its own" in after, after


@contextlib.contextmanager
def kernel_over_equal() -> Iterator[None]:
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        library = torch.library.Library("aten", "IMPL")
        library.impl("equal", lambda a, b: True, "CPU")
    try:
        yield
    finally:
        library._destroy()


@contextlib.contextmanager
def mode_left_on() -> Iterator[None]:
    from torch.overrides import TorchFunctionMode

    mode = TorchFunctionMode()
    mode.__enter__()
    try:
        yield
    finally:
        mode.__exit__(None, None, None)


@contextlib.contextmanager
def changed(container: Any, key: Any, value: Any) -> Iterator[None]:
    before = container[key]
    container[key] = value
    try:
        yield
    finally:
        container[key] = before


@contextlib.contextmanager
def import_hook() -> Iterator[None]:
    sys.meta_path.insert(0, object())
    try:
        yield
    finally:
        sys.meta_path.pop(0)


def changes() -> dict[str, tuple[Callable, str]]:
    import autograder.checks.expect as expect
    import autograder.comm as comm

    return {
        "a check's keyword default": (
            lambda: changed(expect.expect_close.__kwdefaults__, "rel", 1.0),
            "autograder.checks.expect.expect_close's code or defaults",
        ),
        "a module constant's contents": (
            lambda: changed(comm._COLLECTIVE_NAMES, "allgather_", "broadcast"),
            "autograder.comm._COLLECTIVE_NAMES",
        ),
        "a kernel over aten::equal": (kernel_over_equal, "the kernels registered for aten::equal"),
        "a mode left on": (mode_left_on, "torch's function mode stack"),
        "an import hook": (import_hook, "sys.meta_path"),
    }


def test_changes_below_the_names_are_found() -> None:
    # (What the guard compares at each look, here without its hook: each change is undone.)
    from launcher import guard, guard_state

    guard._import_all("autograder")
    noted = guard_state.note(("launcher", "autograder"))
    assert guard_state.changes(noted, guard.submissions_code) == []
    for name, (change, found) in changes().items():
        with change():
            assert found in guard_state.changes(noted, guard.submissions_code), name
        assert guard_state.changes(noted, guard.submissions_code) == [], name


def test_a_look_compares_whole_only_the_namespaces_whose_version_changed(monkeypatch) -> None:
    import torch

    from launcher import guard, guard_state

    guard._import_all("autograder")
    # (Not the launcher's: counting below replaces a function of launcher.guard_state.)
    noted = guard_state.note(("autograder",))
    assert noted["read_version"] is not None, "CPython 3.10 to 3.13 keep a version in each dict"
    compared: list[str] = []
    whole = guard_state._namespace_changes

    def counted(name: str, *args: Any) -> list[str]:
        if name in noted["modules"]:
            compared.append(name)
        return whole(name, *args)

    def look() -> list[str]:
        compared.clear()
        return guard_state.changes(noted, guard.submissions_code)

    monkeypatch.setattr(guard_state, "_namespace_changes", counted)
    assert look() == [] and compared == []
    original = torch.allclose
    try:
        torch.allclose = lambda *args, **kwargs: True
        assert "torch.allclose" in look() and compared == ["torch"]
        assert "torch.allclose" in look() and compared == ["torch"]  # found again, every look
        torch.allclose = original
        assert look() == [] and compared == ["torch"]  # changed back: compared whole once more,
        assert look() == [] and compared == []  # and then no longer
    finally:
        torch.allclose = original
    noted["read_version"] = None  # a Python without the version: every namespace, every look
    assert look() == [] and sorted(compared) == sorted(noted["modules"])


SETTERS = {
    "keyword defaults in place": "e.expect_close.__kwdefaults__['rel'] = 10.0",
    "keyword defaults": "e.expect_close.__kwdefaults__ = dict(e.expect_close.__kwdefaults__, rel=10.0)",
    "defaults": "e.expect_close.__defaults__ = ('a value',)",
    "code": "e.fail.__code__ = compile('pass', 'x', 'exec')",
}


@pytest.mark.parametrize("what", list(SETTERS))
def test_a_check_whose_code_or_defaults_are_set_is_found_in_the_kernel_and_in_a_rank(what: str) -> None:
    # (Found through the hook's sight of the setting, or, in place, through the keyword defaults'
    # dict's version: a look compares every function only then.)
    script = (
        "import autograder.checks.expect as e\n"
        "from launcher import launch, LaunchError\n"
        "def rank(r, size):\n"
        "    import autograder.checks.expect as e\n"
        f"    {SETTERS[what]}\n"
        "try:\n"
        "    launch(rank, 2)\n"
        "except LaunchError as error:\n"
        "    print('rank:', 'TamperingDetected' in str(error))\n"
        f"print(cell({'import autograder.checks.expect as e; ' + SETTERS[what]!r}))\n"
        "print(cell('pass'))\n"
    )
    lines = run_guarded(script)
    assert lines[-3] == "rank: True", lines
    assert lines[-2] == "ran"
    assert lines[-1].startswith("TamperingDetected: code run before this cell changed"), lines[-1]
    assert "autograder.checks.expect." in lines[-1] and "code or defaults" in lines[-1], lines[-1]


def test_a_dicts_version_changes_with_every_key_set_to_another_object_or_deleted() -> None:
    from launcher.guard_state import dict_version_reader

    read = dict_version_reader()
    namespace = {"a": 1, "b": object()}
    seen = [read(namespace)]
    _ = namespace["a"], list(namespace.items()), namespace.get("b")
    assert read(namespace) == seen[-1]  # reading changes nothing
    for change in (
        lambda: namespace.__setitem__("b", object()),
        lambda: namespace.update(a=2),
        lambda: namespace.setdefault("c", 3),
        lambda: namespace.pop("a"),
        lambda: namespace.popitem(),
        namespace.clear,
    ):
        change()
        seen.append(read(namespace))
    assert len(set(seen)) == len(seen), seen


def test_the_fork_server_starts_once_from_a_fixed_environment(tmp_path) -> None:
    (tmp_path / "planted.py").write_text("import builtins\nbuiltins.planted = True\n")
    script = (
        "import os\nfrom launcher import launch, preload, shutdown\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "os.environ['PYTHONPATH'] = " + repr(str(tmp_path)) + "\n"
        "preload('planted')\n"
        "print(launch(lambda rank, size: hasattr(__import__('builtins'), 'planted'), 1))\n"
        "shutdown()\n"
        "try:\n    launch(lambda rank, size: 0, 1)\nexcept Exception as error:\n"
        "    print(type(error).__name__, 'only once' in str(error))\n"
    )
    assert run_guarded(script)[-2:] == ["[False]", "ForkServerError True"]


def test_every_hidden_region_runs_at_the_top_level() -> None:
    # Each region is run by itself (launcher/hidden_tests.py): it must be whole code, at the top
    # level of its cell, and what is sent in its place must run as the cell's code.
    found = 0
    for assignment in ASSIGNMENTS:
        for cell in read(notebook_path("solutions", assignment)).cells:
            if is_test(cell) and BEGIN in cell.source:
                sent, regions = split(cell.source)
                assert sent.count(CALL) == len(regions) >= 1
                for line in cell.source.splitlines():
                    if line.strip() == BEGIN:
                        assert line == BEGIN, (assignment, cell.metadata.nbgrader.grade_id)
                for code in (sent, *regions):
                    compile(code, "<test>", "exec")
                found += len(regions)
    assert found > 50


def test_the_grader_and_the_kernel_agree_on_where_hidden_tests_travel() -> None:
    import launcher.hidden_tests

    assert METADATA_KEY == launcher.hidden_tests.METADATA_KEY
    assert CALL == "__import__('launcher.hidden_tests').hidden_tests.run()"
    assert callable(launcher.hidden_tests.run)


def test_split_keeps_the_visible_code_in_order() -> None:
    source = f"a = 1\n{BEGIN}\nb = a\n### END HIDDEN TESTS\nc = 3\n{BEGIN}\nd = 4\n"
    assert split(source) == (f"a = 1\n{CALL}\nc = 3\n{CALL}\n", ["b = a\n", "d = 4\n"])


FORGER = """
import autograder.checks.ledger as ledger


def forge(clock):
    clock.calls = 2
    clock.timeline += [("clock",), ("clock",)]
    ledger.add(clock, ("clock",))
    ledger._VAULT.send(("add", id(clock), ("clock",)))
    clock._record(("clock",))
"""


def test_a_fake_clock_keeps_its_record_out_of_the_timed_code_s_reach() -> None:
    from autograder.checks import FakeClock
    from autograder.checks.expect import CheckFailed

    space: dict = {}
    exec(compile(FORGER, CELL, "exec"), space)  # a submission's code, by its file
    clock = FakeClock([0.25])
    space["forge"](clock)
    with pytest.raises(CheckFailed, match="never read"):
        clock.expect_all_read("forge(clock)")
    with pytest.raises(AttributeError):
        clock.expect_all_read = lambda what: None  # no instance dictionary to shadow it in
    honest = FakeClock([0.25])
    assert -honest() + honest() == 0.25 and honest.calls == 2  # (readings 1000.0, then 1000.25)
    with pytest.raises(CheckFailed, match="read 3 times"):
        honest()


def _hides_a_collective(rank: int, world_size: int, hide: bool) -> dict:
    import torch
    import torch.distributed as dist
    from torch.utils._python_dispatch import _disable_current_modes

    from autograder.comm import CommLog

    t = torch.ones(4)
    with CommLog() as log:
        dist.all_reduce(t)
        dist.all_gather_single(torch.zeros(4 * world_size), t)
        if hide:
            with _disable_current_modes():
                dist.all_reduce(t)
    return log.collectives


def test_a_communication_log_finds_collectives_hidden_from_its_counting() -> None:
    import functools

    from launcher import LaunchError, launch

    assert (
        launch(functools.partial(_hides_a_collective, hide=False), 2)
        == [{"all_reduce": 1, "all_gather": 1}] * 2
    )
    with pytest.raises(LaunchError, match="1 of the collectives this rank ran were hidden"):
        launch(functools.partial(_hides_a_collective, hide=True), 2)


def test_the_guard_proves_with_a_key_no_code_can_read(tmp_path) -> None:
    # The grader's key reaches the guard in a file it deletes as it reads it; after that, only the
    # hook can make the keyed hash of a word, and only while nothing grading relies on changed.
    import hmac
    import os

    from grading import execute, sandbox
    from launcher import guard

    assert (sandbox.KEY_FILE, execute.PROVE_EVENT) == (guard.KEY_FILE, guard.PROVE_EVENT)
    key = b"k" * 32
    (tmp_path / "key").write_bytes(key)
    script = (
        "import os, sys\n"
        "from launcher import guard\n"
        "guard.install('autograder')\n"
        f"print('file left', os.path.exists({str(tmp_path / 'key')!r}), guard.KEY_FILE in os.environ)\n"
        "def prove(word):\n"
        "    try:\n"
        f"        sys.audit({guard.PROVE_EVENT!r}, word)\n"
        "    except Exception as error:\n"
        "        return f'{type(error).__name__} {error}'[:120]\n"
        "print(prove('one'))\n"
        "import autograder.checks.expect as expect\n"
        "expect.fail = lambda message: None\n"
        "print(prove('two'))\n"
    )
    env = {**os.environ, guard.KEY_FILE: str(tmp_path / "key")}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=REPO, env=env
    )
    lines = done.stdout.splitlines()
    assert lines[0] == "file left False False", done.stdout + done.stderr
    assert lines[1] == f"GuardProof {hmac.new(key, b'one', 'sha256').hexdigest()}"
    assert lines[2].startswith("TamperingDetected code this test ran changed"), lines[2]


def test_a_rank_cannot_reach_what_its_guard_compares_with() -> None:
    # (The fork server's baseline, once a rank's guard took it, is held by the rank's hook alone:
    # code in the rank could otherwise rewrite what the rank's state is compared with.)
    script = (
        "from launcher import launch\n"
        "print(launch(lambda rank, size: __import__('launcher.guard').guard._baseline is None, 2))\n"
    )
    assert run_guarded(script)[-1] == "[True, True]"


def test_a_rank_cannot_turn_its_look_off() -> None:
    # (The look when a rank's function returns is held where no code can reach: replacing the
    # names it would go through, then a check, is still found.)
    script = (
        "from launcher import launch, LaunchError\n"
        "def tamper(rank, size):\n"
        "    import sys\n"
        "    import autograder.checks.expect as expect\n"
        "    import launcher.guard as guard\n"
        "    guard.verify = lambda: None\n"
        "    sys.audit = lambda *args: None\n"
        "    expect.fail = lambda message: None\n"
        "try:\n"
        "    launch(tamper, 2)\n"
        "    print('not found')\n"
        "except LaunchError as error:\n"
        "    print('TamperingDetected' in str(error))\n"
    )
    assert run_guarded(script)[-1] == "True"
