"""The grading round trip (see grading.py): every submission scores what it should, and the
instructors' feedback (without the hidden tests) and grade export work."""

from __future__ import annotations

import csv
import html
import re

import pytest
from course import ASSIGNMENTS, exercise_tests, notebook_path, read, secret_lines
from round_trip import STUDENTS, GradedClass, Student

from grading import demos


@pytest.mark.parametrize("student", STUDENTS, ids=[f"{s.assignment}/{s.name}" for s in STUDENTS])
def test_each_submission_scores_what_it_should(graded_class: GradedClass, student: Student) -> None:
    grades = graded_class.grades[(student.assignment, student.name)]
    tests = {
        t for ts in exercise_tests(read(notebook_path("solutions", student.assignment))).values() for t in ts
    }
    assert set(grades) == tests
    for test, (score, max_score) in grades.items():
        expected = 0 if student.untouched or test in student.zero else max_score
        assert score == expected, f"{student.name}: {test} scored {score} of {max_score}, expected {expected}"


def test_feedback_and_grade_export_work(graded_class: GradedClass) -> None:
    root = graded_class.root
    rows = [r for r in csv.DictReader((root / "grades.csv").open()) if r["student_id"] == "solutions"]
    assert sorted(r["assignment"] for r in rows) == ASSIGNMENTS
    for row in rows:
        assert float(row["score"]) == float(row["max_score"]) > 0, row
        (feedback,) = (root / "feedback" / "solutions" / row["assignment"]).glob("*.html")
        page = feedback.read_text()
        assert f"(Score: {float(row['score']):.1f} / {float(row['max_score']):.1f})" in page
        text = html.unescape(re.sub(r"<[^>]+>", "", page))  # the code, out of its highlighting
        for line in secret_lines(row["assignment"]):
            assert line not in text, f"{row['assignment']}'s feedback shows the hidden test line {line!r}"


def test_grading_leaves_the_demo_cells_out(graded_class: GradedClass) -> None:
    """The cells tagged "demo" in the solutions only show something: grading does not run them
    (grading/demos.py). In each assignment's graded solutions, every one says so, and every
    test keeps its points."""
    for assignment in ASSIGNMENTS:
        source = read(notebook_path("solutions", assignment))
        tagged = demos.demo_sources(source)
        graded = graded_class.graded_notebook("solutions", assignment)
        left_out = [cell for cell in graded.cells if cell.cell_type == "code" and cell.source in tagged]
        assert len(left_out) == sum(map(demos.is_demo, source.cells)) > 0, assignment
        for cell in left_out:
            assert cell.execution_count is None, f"{assignment}: a demo ran:\n{cell.source}"
            assert [output.get("text") for output in cell.outputs] == [demos.NOTE], cell.source
        grades = graded_class.grades[(assignment, "solutions")]
        assert all(score == max_score for score, max_score in grades.values()), (assignment, grades)
