"""The notebooks themselves: solutions run, the release is what nbgrader makes of them, and a
student needs none of the instructors' tools."""

from __future__ import annotations

import ast
import shutil
import time
from pathlib import Path

import nbformat
import pytest
from course import ASSIGNMENTS, REPO, notebook_path, read
from nbclient import NotebookClient

from autograder.release import generate

# What a student's install does not have: the instructors' and developers' tools.
NOT_FOR_STUDENTS = ("nbgrader", "nbclient", "nbconvert", "nbformat", "pytest")
STUDENT_PACKAGES = ("launcher", "autograder", "visuals")


def code_cells(notebook: nbformat.NotebookNode) -> list[str]:
    return [cell.source for cell in notebook.cells if cell.cell_type == "code"]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_solution_notebook_runs_top_to_bottom_without_instructor_tools(assignment: str) -> None:
    notebook = read(notebook_path("solutions", assignment))
    block = "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in NOT_FOR_STUDENTS)
    notebook.cells.insert(0, nbformat.v4.new_code_cell(block))
    client = NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(REPO)}}
    )
    start = time.perf_counter()
    client.execute()  # raises CellExecutionError, with the cell and its traceback, on any error
    print(f"\n{assignment}: executed in {time.perf_counter() - start:.1f} s")


def test_the_release_is_what_nbgrader_makes_of_the_solutions(tmp_path: Path) -> None:
    (tmp_path / "autograder").mkdir()
    shutil.copytree(REPO / "solutions", tmp_path / "solutions")
    shutil.copy(REPO / "nbgrader_config.py", tmp_path)
    shutil.copy(REPO / "autograder" / "nbgrader_config.py", tmp_path / "autograder")
    generate(["*"], tmp_path, database=False)
    for assignment in ASSIGNMENTS:
        committed = notebook_path("notebooks", assignment)
        fresh = tmp_path / "notebooks" / assignment / committed.name
        assert fresh.read_text() == committed.read_text(), (
            f"{committed.relative_to(REPO)} is out of date: run `make release` and commit the result"
        )
    assert sorted(p.name for p in (REPO / "notebooks").iterdir()) == ASSIGNMENTS


@pytest.mark.parametrize("folder", ["solutions", "notebooks"])
def test_notebooks_are_committed_without_outputs(folder: str) -> None:
    for assignment in ASSIGNMENTS:
        for cell in read(notebook_path(folder, assignment)).cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, (
                    f"{folder}/{assignment}: a cell carries outputs ({cell.source[:60]!r}...); clear them"
                )


def imported_modules(source: str) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module.split(".")[0])
    return modules


def test_students_need_none_of_the_instructors_tools() -> None:
    sources = {
        f"notebooks/{a}": "\n".join(code_cells(read(notebook_path("notebooks", a)))) for a in ASSIGNMENTS
    }
    for package in STUDENT_PACKAGES:
        for path in (REPO / package).glob("*.py"):
            if path.name not in ("release.py", "nbgrader_config.py"):  # the instructors' side
                sources[str(path.relative_to(REPO))] = path.read_text()
    for where, source in sources.items():
        assert not imported_modules(source) & set(NOT_FOR_STUDENTS), f"{where} imports an instructor tool"
