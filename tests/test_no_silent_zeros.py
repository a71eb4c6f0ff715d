"""Grading grades right or stops and says why: never a class of zeros that look like grades.

- The kernel imports the course being graded, whatever the environment's install points to:
  a second copy of the course, graded with the first copy's environment, gets full marks, inside
  the sandbox and out; so does an environment kept in the system's temporary folder.
- Before the first submission, a kernel started as submissions' are must import the course
  (grading/preflight.py): when it cannot start, or imports another copy, nothing is graded,
  and the message says what was expected, what was found and the fix.
- A submission nbgrader could not grade, or whose outcome is the grader's fault
  (grading/ungraded.py), is listed by the class command as NOT GRADED, with why.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook, MissingEntry
from small_assignment import ASSIGNMENT, NOTEBOOK, REPO, hand_in, nbgrader, release, source_notebook

from grading import grade_class, preflight
from grading.sandbox import bwrap_problem
from grading.ungraded import not_graded_because

needs_bwrap = pytest.mark.skipif(
    bwrap_problem("bwrap") is not None,
    reason=f"no sandbox here: {bwrap_problem('bwrap')} Install bubblewrap (apt install bubblewrap).",
)
RIGHT = "def second():\n    return 2"


def score(root: Path, student: str) -> float:
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        return gradebook.find_submission(ASSIGNMENT, student).score


def origins_test(course: Path) -> str:
    """A test cell that passes only if the kernel and its ranks import the course from ``course``."""
    return (
        "import autograder, launcher, visuals\n"
        "from launcher import launch\n\n\n"
        "def where(rank, world_size):\n"
        "    import autograder, launcher\n"
        "    return [autograder.__file__, launcher.__file__]\n\n\n"
        "files = [autograder.__file__, launcher.__file__, visuals.__file__]\n"
        "files += [f for files_of_rank in launch(where, 2) for f in files_of_rank]\n"
        f"assert all(f.startswith({str(course) + '/'!r}) for f in files), files\n"
    )


@needs_bwrap
@pytest.mark.parametrize("sandbox", [True, False], ids=["sandboxed", "not-sandboxed"])
def test_a_second_copy_of_the_course_grades_with_its_own_packages(tmp_path: Path, sandbox: bool) -> None:
    # This environment's install of the course is an editable one of REPO: the copy's grading
    # (nbgrader imports the course's code from the folder it runs in) must not use it.
    copy = tmp_path / "second-copy"
    release(copy, source_notebook(more_tests={"test_course": origins_test(copy)}), packages=True)
    hand_in(copy, "ada", RIGHT)
    done = nbgrader(copy, "autograde", ASSIGNMENT, *([] if sandbox else ["--SandboxedExecute.sandbox=False"]))
    assert score(copy, "ada") == 5, done.stdout + done.stderr


@needs_bwrap
def test_an_environment_in_the_temporary_folder_grades(tmp_path: Path) -> None:
    # An environment in /tmp, which the sandbox replaces by a private one of its own: this one's
    # packages, reached through a .pth file as a copied environment would reach its own.
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="grading-env-") as folder:
        env = Path(folder) / "env"
        base = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
        (site,) = (env / "lib").glob("python3*/site-packages")
        (site / "course-env.pth").write_text(
            f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n"
        )
        course = release(tmp_path / "course")
        hand_in(course, "ada", RIGHT)
        done = nbgrader(course, "autograde", ASSIGNMENT, python=str(env / "bin" / "python"))
        assert "Grading stopped" not in done.stdout + done.stderr
        assert score(course, "ada") == 4, done.stdout + done.stderr


@needs_bwrap
def test_a_kernel_that_cannot_start_stops_grading_before_the_first_submission(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    course = release(tmp_path / "course")
    hand_in(course, "ada", RIGHT)
    tiny = "--SandboxedExecute.max_memory=20000000"  # 20 MB: no Python kernel starts in that
    done = nbgrader(course, "autograde", ASSIGNMENT, tiny, check=False)
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert "Grading stopped before the first submission" in said
    assert "did not start" in said and "used more than" in said and "max_memory" in said  # what, why, fix
    assert not (course / "autograded").exists()
    with pytest.raises(MissingEntry):  # nothing in the gradebook either: not even a zero
        score(course, "ada")

    # The class command stops too, before any worker grades anyone, and says so.
    with (course / "nbgrader_config.py").open("a") as config:
        config.write(f"\nc.{tiny[2:]}\n")
    assert grade_class.main([ASSIGNMENT, "--root", str(course), "--jobs", "2"]) == 2
    printed = capsys.readouterr()
    assert "Grading stopped before the first submission" in printed.err and "max_memory" in printed.err
    assert "No submission was graded" in printed.err
    assert not (course / "autograded").exists()


def test_a_kernel_that_imports_another_copy_of_the_course_stops_grading(tmp_path: Path) -> None:
    # A kernel spec that puts another copy first (outside the sandbox, where it can be seen).
    other = tmp_path / "other-copy"
    for package in ("autograder", "launcher", "visuals"):
        shutil.copytree(REPO / package, other / package, ignore=shutil.ignore_patterns("__pycache__"))
    start = f"import sys; sys.path.insert(0, {str(other)!r}); from ipykernel import kernelapp; "
    start += "kernelapp.launch_new_instance()"
    spec = tmp_path / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-c", start, "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "Python 3", "language": "python"})
    )
    course = release(tmp_path / "course")
    hand_in(course, "ada", RIGHT)
    env = {"JUPYTER_PATH": str(tmp_path / "jupyter")}
    done = nbgrader(course, "autograde", ASSIGNMENT, "--SandboxedExecute.sandbox=False", check=False, env=env)
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert "does not import the course being graded" in said
    assert (
        f"expected {REPO / 'autograder' / '__init__.py'}, found {other / 'autograder' / '__init__.py'}"
        in said
    )
    assert "another copy of the course first" in said  # the fix
    assert not (course / "autograded").exists()


@needs_bwrap
def test_the_class_command_lists_what_nbgrader_could_not_grade(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    course = release(tmp_path / "course")
    hand_in(course, "ada", RIGHT)
    hand_in(course, "bob", RIGHT).write_text('{"cells": [')  # a notebook cut short on its way in
    assert grade_class.main([ASSIGNMENT, "--root", str(course)]) == 1
    printed = capsys.readouterr().out
    lines = {
        line.split("] ", 1)[1].split(":", 1)[0]: line for line in printed.splitlines() if line.startswith("[")
    }
    assert "4/4 in" in lines["ada"]
    assert "bob: NOT GRADED" in lines["bob"] and "JSON" in lines["bob"]
    assert "graded 1 of 2" in printed
    summary = printed.split("NOT GRADED: 1 submission(s).", 1)[1]
    assert "--force --students bob" in summary and "  bob: " in summary and "JSON" in summary


@needs_bwrap
def test_a_course_cell_that_fails_before_the_students_code_is_not_a_grade(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    # The grading environment lacks what the course's own first cell imports: no student could
    # have caused that, and no student's zero may come of it.
    course = release(tmp_path / "course", source_notebook(setup="import grading_test_lacks_this"))
    hand_in(course, "ada", RIGHT)
    assert grade_class.main([ASSIGNMENT, "--root", str(course)]) == 1
    printed = capsys.readouterr().out
    reason = (
        "the course's own cell 2 failed before any of the student's code ran "
        "(ModuleNotFoundError: No module named 'grading_test_lacks_this')"
    )
    assert "ada: NOT GRADED after" in printed and reason in printed
    assert not (course / "autograded" / "ada" / ASSIGNMENT / f"{NOTEBOOK}.ipynb").exists()


# -- which outcomes are the grader's fault ----------------------------------------------------


def ran(
    source: str, error: str | None = None, course: bool = True, count: int | None = 1
) -> nbformat.NotebookNode:
    """A code cell as grading left it: run (``count``), and failed with ``error`` ("Name: value")."""
    cell = nbformat.v4.new_code_cell(source, execution_count=count)
    if course:
        cell.metadata.nbgrader = {"locked": True, "grade_id": f"c{abs(hash(source))}", "solution": False}
    if error:
        name, value = error.split(": ", 1)
        cell.outputs = [nbformat.v4.new_output("error", ename=name, evalue=value, traceback=[])]
    return cell


def notebook(*cells: nbformat.NotebookNode) -> nbformat.NotebookNode:
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# title"), *cells])


def test_outcomes_that_are_the_graders_fault_are_told_from_the_students() -> None:
    setup_failed = notebook(
        ran("import torch", "ModuleNotFoundError: No module named 'torch'"), ran("x = 1", course=False)
    )
    assert "course's own cell 2 failed before any of the student's code ran" in not_graded_because(
        setup_failed
    )
    stopped = notebook(
        ran("import torch", "KernelStopped: the sandbox was stopped because ..."), ran("x", course=False)
    )
    assert "before any of the student's code ran (KernelStopped" in not_graded_because(stopped)
    # A student's cell first, then a course cell that cannot import what the course needs.
    lost = notebook(
        ran("y = 2", course=False),
        ran("from autograder import x", "ModuleNotFoundError: No module named 'autograder'"),
    )
    assert "course's cell 3 could not import what it needs" in not_graded_because(lost)
    same = notebook(
        ran("a", "RuntimeError: no kernel here", course=False),
        ran("b", "RuntimeError: no kernel here"),
        ran("c", "RuntimeError: no kernel here", course=False),
    )
    assert "every cell that ran failed with the same error" in not_graded_because(same)

    # The student's doing, and wrong answers: graded.
    blocked = notebook(
        ran("import sys\nsys.modules['torch'] = None", course=False),
        ran("import torch", "ModuleNotFoundError: import of torch halted; None in sys.modules"),
    )
    assert not_graded_because(blocked) is None
    untouched = notebook(
        ran("import torch"),
        ran("raise NotImplementedError()", "NotImplementedError: ", course=False),
        ran("assert f() == 1", "NameError: name 'f' is not defined"),
        ran("raise NotImplementedError()", "NotImplementedError: ", course=False),
        ran("assert g() == 1", "NameError: name 'g' is not defined"),
    )
    assert not_graded_because(untouched) is None
    wrong = notebook(
        ran("import torch"),
        ran("def f(): return 0", course=False, count=2),
        ran("assert f() == 1", "AssertionError: "),
    )
    assert not_graded_because(wrong) is None
    # A student's cell that failed before the course's: the course's failures are graded as usual.
    first = notebook(
        ran("import nothing", "ModuleNotFoundError: No module named 'nothing'", course=False),
        ran("f()", "NameError: name 'f' is not defined"),
    )
    assert not_graded_because(first) is None


def test_the_check_before_grading_says_what_is_wrong_and_what_to_do() -> None:
    def outputs(found: dict[str, str], guarded: bool = True) -> list:
        report = {"python": "/env/bin/python", "path": ["/somewhere"], "found": found, "guarded": guarded}
        return [
            nbformat.v4.new_output("stream", name="stdout", text=f"{preflight.REPORT} {json.dumps(report)}\n")
        ]

    right = {name: str(preflight.ROOT / name / "__init__.py") for name in preflight.PACKAGES}
    assert preflight.compare("python3", outputs(right)) is None
    assert "not guarded against tampering" in preflight.compare("python3", outputs(right, guarded=False))

    elsewhere = {**right, "autograder": "/other/autograder/__init__.py"}
    said = preflight.compare("python3", outputs(elsewhere))
    assert (
        f"autograder: expected {preflight.ROOT / 'autograder' / '__init__.py'}, found /other/autograder"
        in said
    )
    assert "another copy of the course first" in said and "/somewhere" in said

    unseen = {**right, "launcher": "!ModuleNotFoundError: No module named 'launcher'"}
    assert "does not see the course's packages" in preflight.compare("python3", outputs(unseen))

    lacking = {**right, "visuals": "!ModuleNotFoundError: No module named 'matplotlib'"}
    said = preflight.compare("python3", outputs(lacking))
    assert (
        "lacks what the course needs" in said
        and f"/env/bin/python -m pip install -e {preflight.ROOT}" in said
    )

    broken = {**right, "visuals": "!ImportError: cannot import name 'x' from 'y'"}
    assert "python -c 'import visuals'" in preflight.compare("python3", outputs(broken))

    died = [nbformat.v4.new_output("error", ename="KernelStopped", evalue="the kernel died", traceback=[])]
    said = preflight.compare("python3", died, stderr="Fatal Python error: init_fs_encoding")
    assert "said nothing: KernelStopped: the kernel died" in said and "Fatal Python error" in said
