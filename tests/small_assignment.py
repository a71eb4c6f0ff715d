"""A small nbgrader assignment for the grading tests: quick to grade, easy to hand in.

Two answer cells (``first``, ``second``) and four test cells of a point each, the second of which
calls the course's checks and holds a hidden test. `release` makes a course folder with the
course's nbgrader configuration and generates the assignment in it; `hand_in` writes a student's
submission; `nbgrader` runs an nbgrader command there as an instructor would.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from grading.release import nbgrader_environment

REPO = Path(__file__).resolve().parents[1]
ASSIGNMENT = "00-sandbox"
NOTEBOOK = "sandbox"
TESTS = ["test_first", "test_second", "test_third", "test_fourth"]
HIDDEN = "hidden-test-7f3a9c"  # in the hidden test: must never reach a graded notebook
HIDDEN_NAME = "hidden_answer_b41e"  # a name the hidden test binds: must never reach a submission


def cell(kind: str, source: str, grade_id: str = "", points: int = 0) -> nbformat.NotebookNode:
    """A markdown cell, or a code cell: "answer" (a solution), "test" (graded) or "course" (locked)."""
    if kind == "markdown":
        return nbformat.v4.new_markdown_cell(source)
    code = nbformat.v4.new_code_cell(source)
    if grade_id:
        solution, graded = kind == "answer", kind == "test"
        code.metadata.nbgrader = {
            "grade": graded,
            "solution": solution,
            "locked": not solution,
            "grade_id": grade_id,
            "schema_version": 3,
            **({"points": points} if graded else {}),
        }
    return code


def source_notebook(setup: str = "", more_tests: dict[str, str] | None = None) -> nbformat.NotebookNode:
    """The instructors' notebook: ``setup`` is a course cell before the first answer, and
    ``more_tests`` maps more test cells' ids to their code (a point each)."""
    hidden = (
        f"### BEGIN HIDDEN TESTS\n{HIDDEN_NAME} = 2  # {HIDDEN}\nassert second() + 0 == {HIDDEN_NAME}\n"
        "### END HIDDEN TESTS"
    )
    nb = nbformat.v4.new_notebook()
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        cell("markdown", "# A small assignment, for testing grading"),
        *([cell("course", setup, "setup")] if setup else []),
        cell("answer", "### BEGIN SOLUTION\ndef first():\n    return 1\n### END SOLUTION", "first"),
        cell("test", "assert first() == 1", "test_first", 1),
        cell("answer", "### BEGIN SOLUTION\ndef second():\n    return 2\n### END SOLUTION", "second"),
        cell(
            "test",
            f"from autograder.checks import expect_equal\n\nexpect_equal(second(), 2, 'second()')\n{hidden}",
            "test_second",
            1,
        ),
        cell("test", "assert first() + second() == 3", "test_third", 1),
        cell("test", "assert second() - first() == 1", "test_fourth", 1),
        *(cell("test", code, name, 1) for name, code in (more_tests or {}).items()),
    ]
    return nb


def nbgrader(
    root: Path,
    *args: str,
    check: bool = True,
    env: dict[str, str] | None = None,
    python: str = sys.executable,
) -> subprocess.CompletedProcess:
    """Run ``nbgrader *args`` in the course folder ``root``, with ``env`` added to the environment."""
    done = subprocess.run(
        [python, "-m", "nbgrader", *args],
        cwd=root,
        env={**nbgrader_environment(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )
    if check and done.returncode:
        pytest.fail(f"nbgrader {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}")
    return done


def release(root: Path, notebook: nbformat.NotebookNode | None = None, packages: bool = False) -> Path:
    """A course folder at ``root`` with the course's nbgrader configuration and the assignment
    released in it; with ``packages``, a whole copy of the course's packages too (as a second
    clone of the course has), else its grading code is this repository's."""
    (root / "grading").mkdir(parents=True)
    shutil.copy(REPO / "nbgrader_config.py", root)
    if packages:
        for package in ("autograder", "launcher", "visuals", "grading"):
            shutil.copytree(REPO / package, root / package, dirs_exist_ok=True, ignore=_caches)
    shutil.copy(REPO / "grading" / "nbgrader_config.py", root / "grading")
    (root / "solutions" / ASSIGNMENT).mkdir(parents=True)
    nbformat.write(notebook or source_notebook(), root / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    nbgrader(root, "generate_assignment", ASSIGNMENT)
    return root


def _caches(folder: str, names: list[str]) -> list[str]:
    return [name for name in names if name == "__pycache__"]


def hand_in(root: Path, student: str, second: str, beside: dict[str, str] | None = None) -> Path:
    """Hand in the release with ``first`` answered right and ``second`` answered by this code, and
    files beside the notebook (name -> text); returns the submitted notebook's path."""
    released = nbformat.read(root / "notebooks" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    for code in released.cells:
        grade_id = code.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id == "first":
            code.source = "def first():\n    return 1"
        elif grade_id == "second":
            code.source = second
    folder = root / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(released, folder / f"{NOTEBOOK}.ipynb")
    for name, text in (beside or {}).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder / f"{NOTEBOOK}.ipynb"
