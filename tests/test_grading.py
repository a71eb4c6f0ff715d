"""The grading round trip, through nbgrader itself.

For each assignment: ``nbgrader generate_assignment`` makes the release; students hand in the
solutions, the untouched release, and deliberately wrong answers; ``nbgrader autograde`` grades
them; the gradebook must then hold full marks, zeros, and the lost points exactly where the
wrong answers are. Each wrong student has wrong answers in every other exercise, so it also
shows that the other exercises keep their points. Feedback and grade export run too.

Both assignments are released once; the submissions are then shared out between a few copies
of that course, each graded by one `nbgrader autograde` run, all at once (nbgrader's SQLite
gradebook takes one writer at a time, and starting nbgrader costs seconds).
"""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest
from course import (
    ASSIGNMENTS,
    REPO,
    WrongSubmission,
    exercise_tests,
    notebook_path,
    read,
    solution_code,
    submission,
    wrong_submissions,
)
from nbgrader.api import Gradebook

from autograder.release import nbgrader_environment

WORKERS = 3
CELL_TIMEOUT_S = 20  # nbgrader's per-cell limit in these runs (the course ships 120)


@dataclass
class Student:
    assignment: str
    name: str
    code: dict[str, str]  # solution cell -> the student's code (missing: left untouched)
    zero: set[str] = field(default_factory=set)  # test cells that must score nothing
    untouched: bool = False
    extra_cost: float = 0.0  # grading time beyond the usual, in units of notebook 01's


def class_of(assignment: str) -> list[Student]:
    source = read(notebook_path("solutions", assignment))
    solutions = solution_code(source)
    exercises = list(exercise_tests(source))
    by_cell: dict[str, list[WrongSubmission]] = {cell: [] for cell in exercises}
    for wrong in wrong_submissions(assignment):
        by_cell[wrong.replaces].append(wrong)
    students = [
        Student(assignment, "solutions", solutions),
        Student(assignment, "untouched", {}, untouched=True),
    ]
    for variant in (0, 1):
        for half in (0, 1):
            chosen = [by_cell[cell][variant] for cell in exercises[half::2]]
            code = {**solutions, **{w.replaces: w.cell_code(solutions) for w in chosen}}
            zero = {test for w in chosen for test in w.fails}
            students.append(Student(assignment, f"wrong-{variant}{half}", code, zero))
    return students


def stuck_student() -> Student:
    """A submission whose function never returns: nbgrader's cell timeout must cut it short."""
    assignment = "01-memory-hierarchy"
    solutions = solution_code(read(notebook_path("solutions", assignment)))
    forever = "\n\ndef bound(intensity, peak_flops, bandwidth):\n    while True:\n        pass\n"
    code = {**solutions, "roofline": solutions["roofline"] + forever}
    return Student(assignment, "stuck", code, {"test_roofline"}, extra_cost=2)


STUDENTS = [s for a in ASSIGNMENTS for s in class_of(a)] + [stuck_student()]


def nbgrader(root: Path, *args: str) -> None:
    with (root / "nbgrader.log").open("a") as log:
        done = subprocess.run(
            [sys.executable, "-m", "nbgrader", *args],
            cwd=root,
            env=nbgrader_environment(),
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=900,
        )
    if done.returncode:
        pytest.fail(
            f"nbgrader {' '.join(args)} failed in {root}:\n{(root / 'nbgrader.log').read_text()[-4000:]}"
        )


def released_course(root: Path) -> Path:
    """A copy of the course with every assignment released (and recorded in its gradebook)."""
    (root / "autograder").mkdir(parents=True)
    shutil.copytree(REPO / "solutions", root / "solutions")
    shutil.copy(REPO / "nbgrader_config.py", root)
    shutil.copy(REPO / "autograder" / "nbgrader_config.py", root / "autograder")
    nbgrader(root, "generate_assignment", "*", "--force")
    return root


def hand_in(root: Path, student: Student) -> None:
    notebook = notebook_path("solutions", student.assignment).name
    release = read(root / "notebooks" / student.assignment / notebook)
    handed_in = release if student.untouched else submission(release, student.code)
    target = root / "submitted" / student.name / student.assignment
    target.mkdir(parents=True)
    nbformat.write(handed_in, target / notebook)


def grade_share(released: Path, root: Path, students: list[Student]) -> dict[tuple[str, str], dict]:
    """Grade these students in a copy of the released course; return their gradebook entries."""
    shutil.copytree(released, root)
    for student in students:
        hand_in(root, student)
    nbgrader(root, "autograde", "*", "--student", "*", f"--Execute.timeout={CELL_TIMEOUT_S}")
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
    cost = {"02-collectives": 3.0, "01-memory-hierarchy": 1.0}
    groups: list[list[Student]] = [[] for _ in range(n)]
    load = [0.0] * n
    solutions_first = sorted(
        students, key=lambda s: (s.name != "solutions", -(cost[s.assignment] + s.extra_cost))
    )
    for student in solutions_first:
        i = 0 if student.name == "solutions" else load.index(min(load))
        groups[i].append(student)
        load[i] += cost[student.assignment] + student.extra_cost
    return groups


@pytest.fixture(scope="module")
def gradebook(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("grading")
    start = time.perf_counter()
    released = released_course(tmp / "released")
    groups = shares(STUDENTS, WORKERS)
    with ThreadPoolExecutor(WORKERS) as pool:
        parts = pool.map(lambda i: grade_share(released, tmp / f"share-{i}", groups[i]), range(WORKERS))
        grades = {key: value for part in parts for key, value in part.items()}
    print(f"\ngrading round trip: {len(STUDENTS)} submissions in {time.perf_counter() - start:.0f} s")
    return {"grades": grades, "solutions_root": tmp / "share-0"}


@pytest.mark.parametrize("student", STUDENTS, ids=[f"{s.assignment}/{s.name}" for s in STUDENTS])
def test_each_submission_scores_what_it_should(gradebook: dict, student: Student) -> None:
    grades = gradebook["grades"][(student.assignment, student.name)]
    tests = {
        t for ts in exercise_tests(read(notebook_path("solutions", student.assignment))).values() for t in ts
    }
    assert set(grades) == tests
    for test, (score, max_score) in grades.items():
        expected = 0 if student.untouched or test in student.zero else max_score
        assert score == expected, f"{student.name}: {test} scored {score} of {max_score}, expected {expected}"


def test_feedback_and_grade_export_work(gradebook: dict) -> None:
    root = gradebook["solutions_root"]
    rows = [r for r in csv.DictReader((root / "grades.csv").open()) if r["student_id"] == "solutions"]
    assert sorted(r["assignment"] for r in rows) == ASSIGNMENTS
    for row in rows:
        assert float(row["score"]) == float(row["max_score"]) > 0, row
        (feedback,) = (root / "feedback" / "solutions" / row["assignment"]).glob("*.html")
        assert f"(Score: {float(row['score']):.1f} / {float(row['max_score']):.1f})" in feedback.read_text()
