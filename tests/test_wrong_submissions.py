"""Every deliberately wrong submission fails the tests of its exercise, and only those, with a
message that names its mistake where its docstring's ``says:`` line gives the words; every other
correct solution passes them.

This runs each exercise's test cells directly in this process, with the submission's code in
place of the solution: the same checks nbgrader runs, in seconds. (test_grading.py sends
submissions through nbgrader itself.)
"""

from __future__ import annotations

import pytest
from course import (
    ASSIGNMENTS,
    WrongSubmission,
    exercise_tests,
    grade_id,
    is_solution,
    is_test,
    later_tests_needing,
    notebook_path,
    other_solutions,
    read,
    solution_code,
    wrong_submissions,
)

CASES = [w for a in ASSIGNMENTS for w in wrong_submissions(a)]
OTHERS = [s for a in ASSIGNMENTS for s in other_solutions(a)]


def run_tests(assignment: str, code: dict[str, str], tests: list[str]) -> dict[str, str]:
    """Run the assignment's set-up, then ``code`` for its solution cells, then the given test
    cells; return each test cell's failure message ("" if it passed)."""
    source = read(notebook_path("solutions", assignment))
    namespace = {"__name__": "__main__"}  # as in a notebook: functions pickle by value
    for cell in source.cells:
        locked = cell.metadata.get("nbgrader", {}).get("locked")
        if cell.cell_type == "code" and locked and not is_test(cell):
            exec(compile(cell.source, f"<{grade_id(cell)}>", "exec"), namespace)
    for cell in source.cells:
        if is_solution(cell):
            exec(compile(code[grade_id(cell)], f"<{grade_id(cell)}>", "exec"), namespace)
    outcome = {}
    for cell in source.cells:
        if grade_id(cell) in tests:
            try:
                exec(compile(cell.source, f"<{grade_id(cell)}>", "exec"), namespace)
                outcome[grade_id(cell)] = ""
            except Exception as exc:  # noqa: BLE001 - nbgrader fails a test cell on any error
                outcome[grade_id(cell)] = f"{type(exc).__name__}: {exc}"
    return outcome


@pytest.mark.parametrize("wrong", CASES, ids=[w.name for w in CASES])
def test_a_wrong_submission_fails_exactly_its_tests(wrong: WrongSubmission) -> None:
    source = read(notebook_path("solutions", wrong.assignment))
    solutions = solution_code(source)
    tests = exercise_tests(source)[wrong.replaces]
    assert set(wrong.fails) <= set(tests), f"{wrong.name} names tests that do not check {wrong.replaces}"
    later = later_tests_needing(wrong.assignment, wrong.replaces)  # they run this answer too
    maybe = later_tests_needing(wrong.assignment, wrong.replaces, may=True)
    code = {**solutions, wrong.replaces: wrong.cell_code(solutions)}
    outcome = run_tests(wrong.assignment, code, tests + later + maybe)
    failed = {test for test, message in outcome.items() if message} - set(maybe)
    expected = set(wrong.fails) | set(later)
    assert failed == expected, f"{wrong.name}: expected {sorted(expected)} to fail, got {outcome}"
    for test in wrong.fails:  # a test that fails must say something a student can act on
        assert len(outcome[test]) > 40, outcome[test]
        # and, where the submission's docstring says how, name the mistake it made
        assert wrong.says in " ".join(outcome[test].split()), (
            f"{wrong.name}: {test} did not say {wrong.says!r}"
        )


@pytest.mark.parametrize("other", OTHERS, ids=[s.name for s in OTHERS])
def test_another_correct_solution_passes_every_test(other: WrongSubmission) -> None:
    source = read(notebook_path("solutions", other.assignment))
    solutions = solution_code(source)
    tests = exercise_tests(source)[other.replaces]
    outcome = run_tests(other.assignment, {**solutions, other.replaces: other.cell_code(solutions)}, tests)
    assert not any(outcome.values()), f"{other.name} is correct, but: {outcome}"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_exercise_has_two_wrong_submissions(assignment: str) -> None:
    counts = {cell: 0 for cell in exercise_tests(read(notebook_path("solutions", assignment)))}
    for wrong in wrong_submissions(assignment):
        counts[wrong.replaces] += 1
    assert all(n >= 2 for n in counts.values()), counts
