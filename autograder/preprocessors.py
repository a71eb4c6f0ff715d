"""The nbgrader preprocessors the course's configuration adds (autograder/nbgrader_config.py).

- `ScoreErrorsNotStderr` (autograding): nbgrader scores a test cell zero when it wrote anything
  to stderr, so a correct answer that warns, logs, or whose ranks print to stderr would lose the
  test's points. A test cell here fails by raising; what it wrote to stderr is kept, as output.
- `HideHiddenTests` (feedback): nbgrader's feedback is the autograded notebook as HTML, which
  holds the hidden tests: in the test cells' source, and in the tracebacks of those that failed,
  which quote the lines around the failing call. It removes the hidden regions from the test
  cells, as the release does, and reduces every error in a test cell to its type and message.

Only instructors run these: students' notebooks never import this module.
"""

from __future__ import annotations

from typing import Any

from nbgrader import utils
from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor


class ScoreErrorsNotStderr(NbGraderPreprocessor):
    """Let a test cell's stderr count as output, not as a failure: it fails by raising."""

    def preprocess_cell(self, cell: Any, resources: dict, cell_index: int) -> tuple[Any, dict]:
        if cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "stream" and output.get("name") == "stderr":
                    output["name"] = "stdout"
        return cell, resources


class HideHiddenTests(ClearHiddenTests):
    """ClearHiddenTests for feedback: also drops the tracebacks of test cells' errors."""

    def preprocess_cell(self, cell: Any, resources: dict, cell_index: int) -> tuple[Any, dict]:
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if cell.cell_type == "code" and utils.is_grade(cell):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    # The message says what failed and why; the traceback would show the code.
                    output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return cell, resources
