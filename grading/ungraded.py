"""Whether a graded notebook's outcome says anything about the student's work.

Some outcomes are the grader's fault until shown otherwise, and scoring them would give the
student a zero that looks like a grade:

- one of the course's own cells failed before any of the student's code ran (its imports, its
  setup: nothing the student wrote can have caused it);
- one of the course's cells could not import a module (the course's packages, torch), unless the
  student's own code had blocked that import;
- every cell that ran failed, each with the same error.

`SandboxedExecute` (grading/sandbox.py) raises `NotGraded` for such a notebook, after running
it: nbgrader then logs it as a submission it could not grade, keeps no score for it, names the
student at the end of its run and exits with status 1, and the class command lists the student
as not graded, with the reason.
"""

from __future__ import annotations

from typing import Any

# What Python says when an import fails because code set sys.modules[name] = None.
BLOCKED = "None in sys.modules"


class NotGraded(Exception):
    """The notebook ran, but its outcome is the grader's fault, not a grade (the message says why)."""


def not_graded_because(nb: Any) -> str | None:
    """Why running this notebook graded nothing of the student's work, or None when it did."""
    student_ran = False
    failures: list[tuple[str, str]] = []
    ran = 0
    for number, cell in enumerate(nb.cells, start=1):
        if cell.get("cell_type") != "code" or not cell.get("source", "").strip():
            continue
        course = cell.get("metadata", {}).get("nbgrader", {}).get("locked", False)
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        error = f"{errors[0].get('ename')}: {errors[0].get('evalue')}" if errors else ""
        if course and errors and not student_ran:
            return f"the course's own cell {number} failed before any of the student's code ran ({error})"
        if course and errors and errors[0].get("ename") == "ModuleNotFoundError" and BLOCKED not in error:
            return f"the course's cell {number} could not import what it needs ({error})"
        student_ran = student_ran or not course
        if cell.get("execution_count") is not None or errors:  # (a cell the sandbox did not run has no count)
            ran += 1
            failures += [(errors[0].get("ename", ""), errors[0].get("evalue", ""))] if errors else []
    if ran >= 2 and len(failures) == ran and len(set(failures)) == 1:
        name, value = failures[0]
        return f"every cell that ran failed with the same error ({name}: {value})"
    return None
