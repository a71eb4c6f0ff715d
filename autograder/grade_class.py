"""Grade a whole class: ``nbgrader autograde --student`` for every student, several at a time.

    python -m autograder.grade_class 02-collectives              # every student not yet graded
    python -m autograder.grade_class 02-collectives --jobs 4     # four students at a time
    python -m autograder.grade_class 02-collectives --force      # grade everyone again
    python -m autograder.grade_class 02-collectives --students ada bob

Run it from the course directory (where nbgrader_config.py is), with the submissions collected in
submitted/<student>/<assignment>/. Each student is graded by nbgrader itself, in a process of its
own, with the course's configuration; a student whose autograded notebook is newer than the
submission is skipped unless ``--force`` is given, so an interrupted run picks up where it
stopped. It prints a line per student as each finishes (time, score, failed and timed-out test
cells, and whether its code was flagged for tampering) with an estimate of the time left, and
a summary at the end. The gradebook is shared by
the workers: on SQLite, each waits for the others' writes rather than failing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from .release import nbgrader_environment


@dataclass
class Outcome:
    """How grading one student went."""

    student: str
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    ok: bool = True
    log: str = ""
    score: float | None = None
    max_score: float | None = None
    failed_tests: list[str] = field(default_factory=list)
    timed_out: list[str] = field(default_factory=list)
    tampering: list[str] = field(default_factory=list)  # what FlagTampering logged


def students_of(root: Path, assignment: str) -> list[str]:
    """The students with a submission of ``assignment`` in submitted/."""
    return sorted(p.parent.name for p in (root / "submitted").glob(f"*/{assignment}") if p.is_dir())


def already_graded(root: Path, assignment: str, student: str) -> bool:
    """Whether the autograded notebooks are newer than everything the student submitted."""
    submitted = list((root / "submitted" / student / assignment).glob("*.ipynb"))
    graded = [root / "autograded" / student / assignment / p.name for p in submitted]
    return bool(submitted) and all(
        g.exists() and g.stat().st_mtime >= s.stat().st_mtime for s, g in zip(submitted, graded, strict=True)
    )


def _graded_before(root: Path, assignment: str, student: str) -> bool:
    """nbgrader skips a student it graded before unless told --force."""
    return (root / "autograded" / student / assignment).exists()


def _database_url(root: Path) -> list[str]:
    """On the default SQLite gradebook, have every worker wait up to a minute for another's write."""
    configs = [root / "nbgrader_config.py", root / "autograder" / "nbgrader_config.py"]
    if any(
        "db_url" in line.split("#")[0] for c in configs if c.exists() for line in c.read_text().splitlines()
    ):
        return []  # the instructor chose a database: leave it alone
    return [f"--CourseDirectory.db_url=sqlite:///{root / 'gradebook.db'}?timeout=60"]


def grade_one(root: Path, assignment: str, student: str, force: bool) -> Outcome:
    """``nbgrader autograde`` for one student, in a process of its own."""
    command = [sys.executable, "-m", "nbgrader", "autograde", assignment, "--student", student]
    command += _database_url(root) + (["--force"] if force else [])
    start = time.perf_counter()
    process = subprocess.Popen(
        command,
        cwd=root,
        env=nbgrader_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    with process.stdout:
        log = process.stdout.read()
    # wait4 gives this process's own CPU time (its kernel and ranks included), where os.times()
    # would mix in the other workers' processes that ended meanwhile.
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    outcome = Outcome(student, time.perf_counter() - start, usage.ru_utime + usage.ru_stime)
    outcome.ok = process.returncode == 0 and "[AutogradeApp | ERROR]" not in log
    outcome.log = log[-3000:]
    outcome.tampering = [
        line.split("tampering detected in ", 1)[1]
        for line in log.splitlines()
        if "tampering detected in " in line
    ]
    return outcome


def read_results(root: Path, assignment: str, outcome: Outcome) -> None:
    """The student's score, and which test cells failed or ran out of time, from the gradebook and
    the autograded notebooks."""
    import nbformat
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        try:
            submission = gradebook.find_submission(assignment, outcome.student)
        except MissingEntry:
            return
        outcome.score, outcome.max_score = submission.score, submission.max_score
        for notebook in submission.notebooks:
            outcome.failed_tests += [
                g.name for g in notebook.grades if g.auto_score is not None and g.auto_score < g.max_score
            ]
    for path in (root / "autograded" / outcome.student / assignment).glob("*.ipynb"):
        for cell in nbformat.read(path, as_version=4).cells:
            errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
            # nbgrader interrupts a cell that runs out of time: the cell ends in KeyboardInterrupt.
            if any(o.get("ename") == "KeyboardInterrupt" or "Timeout" in o.get("ename", "") for o in errors):
                outcome.timed_out.append(
                    cell.metadata.get("nbgrader", {}).get("grade_id", cell.get("id", "?"))
                )


def describe(outcome: Outcome) -> str:
    if not outcome.ok:
        return f"{outcome.student}: nbgrader failed after {outcome.seconds:.1f} s"
    score = "" if outcome.score is None else f"{outcome.score:g}/{outcome.max_score:g}"
    extra = f"; failed: {', '.join(outcome.failed_tests)}" if outcome.failed_tests else ""
    extra += f"; timed out: {', '.join(outcome.timed_out)}" if outcome.timed_out else ""
    extra += "; FLAGGED for tampering" if outcome.tampering else ""
    return f"{outcome.student}: {score} in {outcome.seconds:.1f} s{extra}"


def grade_class(
    root: Path, assignment: str, jobs: int = 1, force: bool = False, students: list[str] | None = None
) -> list[Outcome]:
    """Grade every (chosen) student's submission of ``assignment``, ``jobs`` at a time."""
    everyone = students_of(root, assignment)
    unknown = sorted(set(students or []) - set(everyone))
    if unknown:
        raise SystemExit(f"no submission of {assignment} from {', '.join(unknown)} in {root / 'submitted'}")
    chosen = students or everyone
    todo = [s for s in chosen if force or not already_graded(root, assignment, s)]
    skipped = len(chosen) - len(todo)
    print(
        f"{assignment}: {len(todo)} to grade, {jobs} at a time"
        + (f" ({skipped} graded already)" if skipped else "")
    )
    outcomes: list[Outcome] = []
    start = time.perf_counter()
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        running = [
            pool.submit(grade_one, root, assignment, s, _graded_before(root, assignment, s)) for s in todo
        ]
        for n, future in enumerate(as_completed(running), start=1):
            outcome = future.result()
            read_results(root, assignment, outcome)
            outcomes.append(outcome)
            elapsed = time.perf_counter() - start
            left = elapsed / n * (len(todo) - n)
            print(f"[{n}/{len(todo)}, about {left:.0f} s left] {describe(outcome)}", flush=True)
    summarise(outcomes, time.perf_counter() - start)
    return outcomes


def summarise(outcomes: list[Outcome], wall: float) -> None:
    if not outcomes:
        print("nothing to grade")
        return
    cpu = sum(o.cpu_seconds for o in outcomes) / len(outcomes)
    print(f"graded {len(outcomes)} in {wall:.0f} s ({wall / len(outcomes):.1f} s each, {cpu:.1f} CPU s each)")
    failed = [o for o in outcomes if not o.ok]
    timed_out = [o for o in outcomes if o.timed_out]
    flagged = [o for o in outcomes if o.tampering]
    for title, group in (("nbgrader failed for", failed), ("cells ran out of time for", timed_out)):
        if group:
            print(f"{title}: {', '.join(o.student for o in group)}")
    if flagged:
        print("flagged for tampering (look at these notebooks; their later tests scored zero):")
        for o in flagged:
            print("  " + "\n  ".join(o.tampering))
    for o in failed:
        print(f"--- {o.student} ---\n{o.log}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("assignment")
    parser.add_argument("--jobs", "-j", type=int, default=1, help="students graded at once (default 1)")
    parser.add_argument("--force", action="store_true", help="grade again students already graded")
    parser.add_argument("--students", nargs="+", help="only these students")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the course directory (default: here)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if not (root / "nbgrader_config.py").exists():
        print(f"{root} has no nbgrader_config.py: run this from the course directory.", file=sys.stderr)
        return 2
    outcomes = grade_class(root, args.assignment, args.jobs, args.force, args.students)
    return 1 if any(not o.ok for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
