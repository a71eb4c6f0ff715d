"""The course's notebooks as the tests see them: solution code, and submissions made from it.

A deliberately wrong submission is a file under tests/wrong_submissions/<assignment>/ whose
docstring says which solution cell it goes into and which test cells must then fail:

    \"\"\"What is wrong, in a sentence.

    replaces: ring
    fails: test_ring test_ring_more
    \"\"\"

Its code is appended to that cell's solution, so its definitions replace the right ones.
"""

from __future__ import annotations

import ast
import copy
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from grading.release import assignments

REPO = Path(__file__).resolve().parent.parent
WRONG = REPO / "tests" / "wrong_submissions"
OTHER = REPO / "tests" / "other_solutions"  # correct answers unlike ours, which every test must accept
ASSIGNMENTS = assignments(REPO)

# What a student's install does not have: the instructors' and developers' tools.
NOT_FOR_STUDENTS = ("nbgrader", "nbclient", "nbconvert", "nbformat", "pytest")


def notebook_path(folder: str, assignment: str) -> Path:
    (path,) = (REPO / folder / assignment).glob("*.ipynb")
    return path


def read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def grade_id(cell: nbformat.NotebookNode) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def is_solution(cell: nbformat.NotebookNode) -> bool:
    return bool(cell.metadata.get("nbgrader", {}).get("solution"))


def is_test(cell: nbformat.NotebookNode) -> bool:
    return bool(cell.metadata.get("nbgrader", {}).get("grade")) and cell.cell_type == "code"


def without_solution_markers(code: str) -> str:
    return re.sub(r"[ \t]*### (BEGIN|END) SOLUTION\n", "", code + "\n").rstrip("\n")


def solution_code(source: nbformat.NotebookNode) -> dict[str, str]:
    """Each solution cell's code as a student would write it (the solution markers removed)."""
    return {
        grade_id(cell): without_solution_markers(cell.source) for cell in source.cells if is_solution(cell)
    }


def submission(release: nbformat.NotebookNode, code: dict[str, str]) -> nbformat.NotebookNode:
    """The release notebook with these solution cells filled in, as a student hands it in."""
    filled = copy.deepcopy(release)
    for cell in filled.cells:
        if is_solution(cell) and grade_id(cell) in code:
            cell.source = code[grade_id(cell)]
    return filled


def exercise_tests(source: nbformat.NotebookNode) -> dict[str, list[str]]:
    """Solution cell -> the test cells that check it (those before the next solution cell)."""
    tests: dict[str, list[str]] = {}
    current = None
    for cell in source.cells:
        if is_solution(cell):
            current = grade_id(cell)
            tests[current] = []
        elif is_test(cell) and current is not None:
            tests[current].append(grade_id(cell))
    return tests


def secret_lines(assignment: str) -> list[str]:
    """The hidden tests' code lines of an assignment that neither its release nor its solutions
    show (long enough to mean something: an import the visible tests share is no secret)."""
    source = read(notebook_path("solutions", assignment))
    # What a student sees anyway: the release, and (in a solved notebook's feedback) solutions.
    released = "\n".join(cell.source for cell in read(notebook_path("notebooks", assignment)).cells)
    released += "\n".join(cell.source for cell in source.cells if is_solution(cell))
    lines = []
    for cell in source.cells:
        inside = False
        for line in cell.source.splitlines() if is_test(cell) else []:
            if "BEGIN HIDDEN TESTS" in line or "END HIDDEN TESTS" in line:
                inside = "BEGIN" in line
            elif inside and len(line.strip()) > 20 and line.strip() not in released:
                lines.append(line.strip())
    return lines


# Test cells that also run the answer to an earlier exercise, by design: notebook 06 runs the
# student's 1F1B order through the student's run_schedule, and the student's interleaved 1F1B
# order through the student's run_interleaved; notebook 09 runs the student's expert-parallel layer
# with the student's differentiable exchange; notebook 10's ring merges its blocks with the
# student's merge (see MAY_ALSO_NEED). A wrong answer to that earlier exercise fails them too.
ALSO_NEEDS: dict[str, dict[str, set[str]]] = {
    "06-pipeline-parallel": {"test_1f1b_run": {"schedule"}, "test_interleaved_1f1b_run": {"run_interleaved"}},
    "09-expert-parallel": {"test_backward": {"ep_forward"}, "test_backward_more": {"ep_forward"}},
}
# Test cells that run an earlier answer but fail only where its mistake reaches what they check:
# notebook 10's ring merges its blocks with the student's merge (a merge that overflows only for
# scores far apart passes the ring's cases). The round trip's first wrong merge reaches them.
MAY_ALSO_NEED: dict[str, dict[str, set[str]]] = {
    "10-context-parallel": {"test_ring": {"merge"}, "test_ring_more": {"merge"}},
}


def later_tests_needing(assignment: str, solution: str, may: bool = False) -> list[str]:
    """The test cells of later exercises that also run ``solution``'s answer (and fail with it),
    or, with ``may``, that may fail with it."""
    needs = (MAY_ALSO_NEED if may else ALSO_NEEDS).get(assignment, {})
    return [test for test, cells in needs.items() if solution in cells]


@dataclass
class WrongSubmission:
    """One deliberately wrong answer to one exercise."""

    path: Path
    assignment: str
    replaces: str  # the solution cell's grade id
    fails: list[str]  # the test cells' grade ids that must fail
    code: str
    says: str = ""  # words each failing test's message must contain: the mistake, named

    @property
    def name(self) -> str:
        return f"{self.assignment}/{self.path.stem}"

    def cell_code(self, solutions: dict[str, str]) -> str:
        return f"{solutions[self.replaces]}\n\n\n# In its place: {self.path.name}\n{self.code}"


def wrong_submissions(assignment: str) -> list[WrongSubmission]:
    return _submissions(WRONG, assignment)


def other_solutions(assignment: str) -> list[WrongSubmission]:
    """Correct answers written differently from the solution's (another collective, another
    dtype): each must pass every test of its exercise. Their docstrings say ``fails: none``."""
    return _submissions(OTHER, assignment)


def _submissions(folder: Path, assignment: str) -> list[WrongSubmission]:
    found = []
    for path in sorted((folder / assignment).glob("*.py")):
        code = path.read_text()
        doc = ast.get_docstring(ast.parse(code)) or ""
        fields = dict(re.findall(r"^(replaces|fails|says):\s*(.+)$", doc, flags=re.MULTILINE))
        if "replaces" not in fields or "fails" not in fields:
            raise ValueError(f"{path}: its docstring must have a 'replaces:' line and a 'fails:' line")
        fails = [] if fields["fails"].strip() == "none" else fields["fails"].split()
        says = fields.get("says", "").strip()
        found.append(WrongSubmission(path, assignment, fields["replaces"].strip(), fails, code, says))
    return found
