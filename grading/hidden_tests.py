"""The grader's side of running hidden tests out of a submission's reach (launcher/hidden_tests.py
is the kernel's): a test cell's source split into the code sent as the cell's, each hidden region
replaced by a call of the kernel's runner, and the regions, sent beside it in the request's
metadata (grading/kernel_client.py)."""

from __future__ import annotations

import textwrap

BEGIN, END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
# Where the regions travel, and what runs each in the kernel (launcher/hidden_tests.py's own):
# grading imports no course package, so they are named here as text.
METADATA_KEY = "course_hidden_tests"
CALL = "__import__('launcher.hidden_tests').hidden_tests.run()"


def split(source: str) -> tuple[str, list[str]]:
    """A test cell's source as the grader sends it (each hidden region replaced by `CALL`, at
    its indentation) and the hidden regions, in order."""
    sent: list[str] = []
    regions: list[str] = []
    region: list[str] | None = None
    indent = ""
    for line in source.splitlines(keepends=True):
        if line.strip() == BEGIN and region is None:
            region, indent = [], line[: len(line) - len(line.lstrip())]
        elif line.strip() == END and region is not None:
            regions.append(textwrap.dedent("".join(region)))
            sent.append(f"{indent}{CALL}\n")
            region = None
        elif region is not None:
            region.append(line)
        else:
            sent.append(line)
    if region is not None:  # (a region left open runs to the end of the cell, as nbgrader reads it)
        regions.append(textwrap.dedent("".join(region)))
        sent.append(f"{indent}{CALL}\n")
    return "".join(sent), regions
