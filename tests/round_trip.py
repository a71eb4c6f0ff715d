"""The grading round trip, through nbgrader itself: a class of students, and grading it.

For each assignment, students hand in the solutions, the untouched release, and deliberately
wrong answers; ``nbgrader autograde`` grades them, and ``generate_feedback`` and ``export`` run
on the solutions. Each of two wrong students answers every other exercise wrongly, so the class
also shows that the exercises answered right keep their points. The "solutions" student hands in
with the instructors' tools blocked in its kernel, so its graded notebook also shows that the
solutions run, top to bottom, on a student's install.

The release is made once; the submissions are then shared out between a few copies of it,
each graded by one ``nbgrader autograde`` run, all at once (nbgrader's SQLite gradebook takes
one writer at a time, and starting nbgrader costs seconds).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import machine
import nbformat
import pytest
from course import (
    ASSIGNMENTS,
    NOT_FOR_STUDENTS,
    REPO,
    WrongSubmission,
    exercise_tests,
    later_tests_needing,
    notebook_path,
    read,
    solution_code,
    submission,
    wrong_submissions,
)
from nbgrader.api import Gradebook

from grading.preprocessors import imports_in, tampering
from grading.release import generate, nbgrader_environment
from grading.sandbox import bwrap_problem

# Grading sandboxes every submission (grading/sandbox.py); where bubblewrap is missing, these
# runs opt out, as an instructor may, and tests/test_sandbox.py is skipped, saying why.
SANDBOX_OPTIONS = [] if bwrap_problem("bwrap") is None else ["--SandboxedExecute.sandbox=False"]

# A first cell that makes the instructors' and developers' tools impossible to import.
WITHOUT_INSTRUCTOR_TOOLS = "import sys\n\n" + "".join(
    f"sys.modules[{name!r}] = None\n" for name in NOT_FOR_STUDENTS
)

WORKERS = 3
# About how long nbgrader takes to grade one solved notebook of each assignment on two cores.
GRADING_SECONDS = {
    "01-memory-hierarchy": 15.0,
    "02-collectives": 25.0,
    "03-benchmarking": 25.0,
    "04-data-parallel": 25.0,
    "05-tensor-parallel": 20.0,
    "06-pipeline-parallel": 20.0,
    "07-sharded-data-parallel": 20.0,
    "08-combined-parallelism": 20.0,
    "10-context-parallel": 20.0,
    "09-expert-parallel": 20.0,
}
CELL_TIMEOUT_S = 20  # nbgrader's per-cell limit in these runs on an idle machine (the course ships 120)


@dataclass
class Student:
    assignment: str
    name: str
    code: dict[str, str]  # solution cell -> the student's code (missing: left untouched)
    zero: set[str] = field(default_factory=set)  # test cells that must score nothing
    untouched: bool = False
    first_cell: str = ""  # a code cell the student put before all others
    waits: float = 0.0  # seconds of grading spent waiting rather than computing

    @property
    def cost(self) -> float:
        """About how many seconds grading this submission takes on a two-core machine."""
        seconds = GRADING_SECONDS[self.assignment]
        return seconds / (2 if self.untouched else 1) + self.waits


def class_of(assignment: str) -> list[Student]:
    source = read(notebook_path("solutions", assignment))
    solutions = solution_code(source)
    exercises_tests = exercise_tests(source)
    exercises = list(exercises_tests)
    by_cell: dict[str, list[WrongSubmission]] = {cell: [] for cell in exercises}
    for wrong in wrong_submissions(assignment):
        by_cell[wrong.replaces].append(wrong)
    students = [
        Student(assignment, "solutions", solutions, first_cell=WITHOUT_INSTRUCTOR_TOOLS),
        Student(assignment, "untouched", {}, untouched=True),
    ]
    # Two wrong students: exercise i is answered wrong by student i % 2 and right by the other.
    # So every exercise loses its points to a wrong answer (each of them is also graded on its
    # own, in tests/test_wrong_submissions.py), and keeps them in a notebook whose neighbouring
    # exercises are wrong.
    for n in range(2):
        chosen = [by_cell[cell][n] for i, cell in enumerate(exercises) if i % 2 == n]
        code = {**solutions, **{w.replaces: w.cell_code(solutions) for w in chosen}}
        # (The later tests that run a wrong answer fail too; of those that may, the first student's
        # wrong answer is one whose mistake reaches them.)
        zero = {
            test
            for w in chosen
            for test in w.fails
            + later_tests_needing(assignment, w.replaces)
            + later_tests_needing(assignment, w.replaces, may=n == 0)
        }
        # A wrong answer that reaches into the checks' frames is also flagged as tampering: every
        # test from its exercise on scores nothing.
        flagged = [exercises.index(w.replaces) for w in chosen if tampering(w.code, imports_in(source.cells))]
        zero |= (
            {test for cell in exercises[min(flagged) :] for test in exercises_tests[cell]}
            if flagged
            else set()
        )
        students.append(Student(assignment, f"wrong-{n}", code, zero))
    return students


def stuck_student() -> Student:
    """A submission with a cell that never finishes: nbgrader's cell timeout must cut it short,
    and grading go on. The loop comes before the cell's definitions, which so never happen."""
    assignment = "01-memory-hierarchy"
    solutions = solution_code(read(notebook_path("solutions", assignment)))
    # It waits rather than spins, so that the other graders keep the CPU meanwhile.
    forever = "while True:\n    time.sleep(0.1)\n\n"
    code = {**solutions, "matmul_flops": forever + solutions["matmul_flops"]}
    return Student(assignment, "stuck", code, {"test_matmul_flops"}, waits=CELL_TIMEOUT_S)


def warning_student() -> Student:
    """Correct answers that warn, log and write to stderr, in the kernel and in the ranks, and
    run shell commands (``!echo``, ``files = !ls``): they keep every point (nbgrader alone would
    score a test cell that wrote to stderr zero)."""
    assignment = "06-pipeline-parallel"
    solutions = solution_code(read(notebook_path("solutions", assignment)))
    noisy_split = (
        "import logging\n\n"
        "_split_layers = split_layers\n\n\n"
        "def split_layers(num_layers, num_stages):\n"
        "    logging.getLogger('course').warning('splitting %d layers', num_layers)\n"
        "    return _split_layers(num_layers, num_stages)\n"
    )
    noisy_schedule = (
        "import sys\nimport warnings\n\n"
        "_run_schedule = run_schedule\n\n\n"
        "def run_schedule(*args, **kwargs):\n"
        "    warnings.warn('a correct answer may warn', UserWarning)\n"
        "    print('and write to stderr', file=sys.stderr)\n"
        "    return _run_schedule(*args, **kwargs)\n"
    )
    code = {
        **solutions,
        "split": f"!echo splitting\nfiles = !ls\n{solutions['split']}\n\n\n{noisy_split}",
        "schedule": f"{solutions['schedule']}\n\n\n{noisy_schedule}",
    }
    return Student(assignment, "warns", code)


def tampering_student() -> Student:
    """Correct answers, but one cell makes torch's comparisons always say yes, spelled so that no
    reading of the code can tell: the kernel's guard finds the change as the next cell starts,
    so every test after it scores nothing (and the submission is logged), the tests before it
    keep their points."""
    assignment = "01-memory-hierarchy"
    solutions = solution_code(read(notebook_path("solutions", assignment)))
    patch = 'exec("import torch; torch.allclose = lambda *args, **kwargs: True")\n'
    code = {**solutions, "roofline": f"{solutions['roofline']}\n\n\n{patch}"}
    tests = exercise_tests(read(notebook_path("solutions", assignment)))
    cells = list(tests)
    after = {test for cell in cells[cells.index("roofline") :] for test in tests[cell]}
    return Student(assignment, "tampers", code, after)


STUDENTS = [s for a in ASSIGNMENTS for s in class_of(a)] + [
    stuck_student(),
    warning_student(),
    tampering_student(),
]


def nbgrader(root: Path, *args: str) -> None:
    with (root / "nbgrader.log").open("a") as log:
        done = subprocess.run(
            [sys.executable, "-m", "nbgrader", *args],
            cwd=root,
            env=nbgrader_environment(),
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=machine.scaled(900),
        )
    if done.returncode:
        pytest.fail(
            f"nbgrader {' '.join(args)} failed in {root}:\n{(root / 'nbgrader.log').read_text()[-4000:]}"
        )


def hand_in(root: Path, student: Student) -> None:
    notebook = notebook_path("solutions", student.assignment).name
    release = read(root / "notebooks" / student.assignment / notebook)
    handed_in = release if student.untouched else submission(release, student.code)
    if student.first_cell:
        handed_in.cells.insert(0, nbformat.v4.new_code_cell(student.first_cell))
    target = root / "submitted" / student.name / student.assignment
    target.mkdir(parents=True)
    nbformat.write(handed_in, target / notebook)


def grade_share(released: Path, root: Path, students: list[Student]) -> dict[tuple[str, str], dict]:
    """Grade these students in a copy of the released course; return their gradebook entries."""
    shutil.copytree(released, root)
    for student in students:
        hand_in(root, student)
    nbgrader(
        root,
        "autograde",
        "*",
        "--student",
        "*",
        f"--Execute.timeout={round(machine.scaled(CELL_TIMEOUT_S))}",
        *SANDBOX_OPTIONS,
    )
    if any(s.name == "solutions" for s in students):
        nbgrader(root, "generate_feedback", "*", "--student", "solutions")
        nbgrader(root, "export", "--to", str(root / "grades.csv"))
    grades = {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        for s in students:
            notebook = notebook_path("solutions", s.assignment).stem
            graded = gradebook.find_submission_notebook(notebook, s.assignment, s.name)
            grades[(s.assignment, s.name)] = {g.name: (g.score, g.max_score) for g in graded.grades}
    return grades


def shares(students: list[Student], n: int) -> list[list[Student]]:
    """Split the students into n groups of about equal grading time, longest first; the
    "solutions" students of every assignment go together, for the feedback and export checks."""
    groups: list[list[Student]] = [[] for _ in range(n)]
    load = [0.0] * n
    load[0] = 15.0  # feedback and export
    solutions_first = sorted(students, key=lambda s: (s.name != "solutions", -s.cost))
    for student in solutions_first:
        i = 0 if student.name == "solutions" else load.index(min(load))
        groups[i].append(student)
        load[i] += student.cost
    return groups


@dataclass
class GradedClass:
    grades: dict[tuple[str, str], dict[str, tuple[float, float]]]  # (assignment, student) -> grades
    root: Path  # the course copy where the solutions were graded, with feedback and grades.csv

    def graded_notebook(self, student: str, assignment: str) -> nbformat.NotebookNode:
        name = notebook_path("solutions", assignment).name
        return read(self.root / "autograded" / student / assignment / name)


def grade_class(released: Path, tmp: Path) -> GradedClass:
    start = time.perf_counter()
    groups = shares(STUDENTS, WORKERS)
    with ThreadPoolExecutor(WORKERS) as pool:
        parts = pool.map(lambda i: grade_share(released, tmp / f"share-{i}", groups[i]), range(WORKERS))
        grades = {key: value for part in parts for key, value in part.items()}
    print(f"\ngrading round trip: {len(STUDENTS)} submissions in {time.perf_counter() - start:.0f} s")
    return GradedClass(grades, tmp / "share-0")


def release_course(root: Path) -> Path:
    """A copy of the course at ``root`` with every assignment released by ``nbgrader
    generate_assignment`` and recorded in its gradebook."""
    (root / "grading").mkdir(parents=True)
    shutil.copytree(REPO / "solutions", root / "solutions")
    shutil.copy(REPO / "nbgrader_config.py", root)
    shutil.copy(REPO / "grading" / "nbgrader_config.py", root / "grading")
    generate(["*"], root)
    return root
