"""How long grading a class takes: N solved submissions of one assignment, graded by
``grading.grade_class`` with 1 worker and then with J, in a fresh copy of the course.

Each submission is the solution notebook's code in the release, handed in as a student would;
every one must score full marks. Reported: wall time in all and per notebook, and the CPU
seconds nbgrader and its kernels used per notebook.

Run it with:  .venv/bin/python benchmarks/grade_class.py 01-memory-hierarchy --students 20 --jobs 1 2
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # the test suite's notebook helpers

from course import notebook_path, read, solution_code, submission  # noqa: E402

from grading.grade_class import grade_class  # noqa: E402
from grading.release import generate  # noqa: E402


def course_with_class(where: Path, assignment: str, students: int) -> Path:
    """A released copy of the course with ``students`` solved submissions of ``assignment``."""
    root = where / "course"
    (root / "grading").mkdir(parents=True)
    shutil.copytree(REPO / "solutions", root / "solutions")
    shutil.copy(REPO / "nbgrader_config.py", root)
    shutil.copy(REPO / "grading" / "nbgrader_config.py", root / "grading")
    with contextlib.redirect_stdout(io.StringIO()):
        generate([assignment], root)
    release = read(root / "notebooks" / assignment / notebook_path("solutions", assignment).name)
    solved = submission(release, solution_code(read(notebook_path("solutions", assignment))))
    for n in range(students):
        target = root / "submitted" / f"student-{n:02d}" / assignment
        target.mkdir(parents=True)
        nbformat.write(solved, target / notebook_path("solutions", assignment).name)
    return root


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("assignment")
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        help="an nbgrader option for every run, e.g. --option=--SandboxedExecute.shutdown_kernel=graceful",
    )
    args = parser.parse_args()
    options = f" with {' '.join(args.option)}" if args.option else ""
    print(f"{os.cpu_count()} cores; {args.students} solved submissions of {args.assignment}{options}")
    for jobs in args.jobs:
        with tempfile.TemporaryDirectory() as tmp:
            root = course_with_class(Path(tmp), args.assignment, args.students)
            start = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()):
                outcomes = grade_class(root, args.assignment, jobs=jobs, options=args.option)
            wall = time.perf_counter() - start
        full = all(o.graded and o.score == o.max_score for o in outcomes)
        cpu = sum(o.cpu_seconds for o in outcomes) / len(outcomes)
        each = sorted(o.seconds for o in outcomes)
        print(
            f"{jobs} worker(s): {wall:.0f} s in all, {wall / len(outcomes):.1f} s a notebook, "
            f"{cpu:.1f} CPU s a notebook; all full marks: {full}; each took "
            f"{each[0]:.1f} s at least, {statistics.median(each):.1f} s middling, {each[-1]:.1f} s at most"
        )


if __name__ == "__main__":
    main()
