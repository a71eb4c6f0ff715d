"""The notebooks themselves: solutions run, the release is what nbgrader makes of them, and a
student needs none of the instructors' tools."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import nbformat
import pytest
from course import ASSIGNMENTS, NOT_FOR_STUDENTS, REPO, notebook_path, read, without_solution_markers
from round_trip import GradedClass

from grading import demos

STUDENT_PACKAGES = ("launcher", "autograder", "visuals")


def code_cells(notebook: nbformat.NotebookNode) -> list[str]:
    return [cell.source for cell in notebook.cells if cell.cell_type == "code"]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_solution_notebook_runs_top_to_bottom_without_instructor_tools(
    graded_class: GradedClass, assignment: str
) -> None:
    """The solutions, handed in by a student whose kernel cannot import the instructors' tools,
    are executed by nbgrader with the hidden tests back in: that is the solution notebook, run
    top to bottom, but for the demo cells grading leaves out (grading/demos.py; the environment
    jobs run those: tests/environments/run_solutions.py). No cell may have raised."""
    executed = graded_class.graded_notebook("solutions", assignment)
    cells = [cell for cell in executed.cells if cell.cell_type == "code"][1:]  # after the blocking cell
    source = read(notebook_path("solutions", assignment))
    solutions = code_cells(source)
    assert [without_solution_markers(c.source) for c in cells] == list(
        map(without_solution_markers, solutions)
    )
    left_out = demos.demo_sources(source)
    for cell in cells:
        if cell.source in left_out:
            assert [o.get("text") for o in cell.outputs] == [demos.NOTE], cell.source
            continue
        errors = [output for output in cell.outputs if output.output_type == "error"]
        if errors or cell.execution_count is None:
            traceback = "\n".join(errors[0].traceback) if errors else "(it did not run)"
            pytest.fail(f"{assignment}: this cell failed:\n{cell.source}\n\n{traceback}")


def without_python_version(notebook: Path) -> dict:
    content = json.loads(notebook.read_text())
    content["metadata"].get("language_info", {}).pop("version", None)
    return content


def test_the_release_is_what_nbgrader_makes_of_the_solutions(released_course: Path) -> None:
    for assignment in ASSIGNMENTS:
        committed = notebook_path("notebooks", assignment)
        fresh = released_course / "notebooks" / assignment / committed.name
        # The release records the releasing Python's version: a developer's may differ from it.
        assert without_python_version(fresh) == without_python_version(committed), (
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
    for package in STUDENT_PACKAGES:  # (the instructors' side is grading/)
        for path in (REPO / package).rglob("*.py"):
            sources[str(path.relative_to(REPO))] = path.read_text()
    for where, source in sources.items():
        assert not imported_modules(source) & set(NOT_FOR_STUDENTS), f"{where} imports an instructor tool"


# What a demo cell must not do, since grading leaves it out: set what later cells rely on.
STATE_SETTERS = (
    "torch.manual_seed",
    "torch.cuda.manual_seed",
    "random.seed",
    "np.random.seed",
    "torch.set_default_dtype",
    "torch.set_default_device",
    "torch.use_deterministic_algorithms",
    "os.putenv",
    "os.environ",
)


def state_set(code: str) -> list[str]:
    """The calls of a cell's own code (not in the functions it defines: what runs on the ranks,
    or when called, is not the cell's own) that set global state."""
    found, pending = [], [ast.parse(code)]
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Call, ast.Subscript)):
            name = ast.unparse(node.func if isinstance(node, ast.Call) else node.value)
            found += [name for setter in STATE_SETTERS if name == setter or name.startswith(f"{setter}.")]
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            pending += list(ast.iter_child_nodes(node))
    return found


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_demo_cells_are_ones_grading_may_leave_out(assignment: str) -> None:
    """A cell tagged "demo" (docs/instructors.md) is no nbgrader cell, sets no seed or environment,
    and binds no name a later cell that runs reads: grading leaves out every one of them when the
    solutions are handed in (grading/demos.py)."""
    source = read(notebook_path("solutions", assignment))
    tagged = [i for i, cell in enumerate(source.cells) if demos.TAG in cell.metadata.get("tags", [])]
    for index in tagged:
        cell = source.cells[index]
        where = f"{assignment}, cell {index} ({cell.source[:50]!r}...)"
        assert cell.cell_type == "code" and not demos.is_nbgrader_cell(cell), (
            f"{where}: not a plain code cell"
        )
        assert not state_set(cell.source), f"{where} sets {state_set(cell.source)}: it is no demo"
    kept = sorted(set(tagged) - demos.cells_to_skip(source, demos.demo_sources(source)))
    assert not kept, f"{assignment}: cells {kept} bind names later cells read, or cannot be read; untag them"


def test_the_release_keeps_the_demo_cells_as_they_are() -> None:
    """Grading leaves out a submitted cell with a demo's code: the release must hand it out
    unchanged, with its tag."""
    for assignment in ASSIGNMENTS:
        source, release = (read(notebook_path(folder, assignment)) for folder in ("solutions", "notebooks"))
        tagged = {c.id: c.source for c in source.cells if demos.TAG in c.metadata.get("tags", [])}
        released = {c.id: c.source for c in release.cells if demos.TAG in c.metadata.get("tags", [])}
        assert released == tagged, f"notebooks/{assignment}: its demo cells differ; run `make release`"
