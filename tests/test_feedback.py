"""Feedback shows which tests failed and why, never the hidden tests' code (grading/preprocessors.py).
The grading round trip (test_grading.py) checks the same on the feedback nbgrader writes."""

from __future__ import annotations

import copy

import nbformat
from course import ASSIGNMENTS, is_test, notebook_path, read, secret_lines

from grading.preprocessors import HideHiddenTests


def shown_text(cell: nbformat.NotebookNode) -> str:
    """A cell's source and everything its outputs would show."""
    parts = [cell.source]
    for output in cell.get("outputs", []):
        parts += [output.get("text", ""), output.get("evalue", ""), *output.get("traceback", [])]
    return "\n".join(parts)


def test_feedback_drops_hidden_tests_and_the_tracebacks_that_quote_them() -> None:
    for assignment in ASSIGNMENTS:
        notebook = copy.deepcopy(read(notebook_path("solutions", assignment)))
        secrets = secret_lines(assignment)
        assert secrets, assignment
        for cell in notebook.cells:
            if is_test(cell) and "BEGIN HIDDEN TESTS" in cell.source:
                # A failed hidden test, as the autograded notebook records it: the traceback
                # quotes the lines around the failing call.
                quoted = "\n".join(f"----> {line}" for line in cell.source.splitlines())
                error = {
                    "ename": "CheckFailed",
                    "evalue": "rank 2: expected 3",
                    "traceback": ["Traceback", quoted],
                }
                cell.outputs = [nbformat.v4.new_output("error", **error)]
        HideHiddenTests().preprocess(notebook, {})
        shown = "\n".join(shown_text(cell) for cell in notebook.cells if is_test(cell))
        for line in secrets:
            assert line not in shown, f"{assignment}: the feedback shows the hidden line {line!r}"
        failures = [o for c in notebook.cells if is_test(c) for o in c.get("outputs", [])]
        assert failures and all(o.traceback == ["CheckFailed: rank 2: expected 3"] for o in failures)
