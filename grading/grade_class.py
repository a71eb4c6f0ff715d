"""Grade a whole class: ``nbgrader autograde`` for every student, several at a time.

    python -m grading.grade_class 02-collectives              # every student not yet graded
    python -m grading.grade_class 02-collectives --jobs 4     # four students at a time
    python -m grading.grade_class 02-collectives --force      # grade everyone again
    python -m grading.grade_class 02-collectives --students ada bob

Run it from the course directory (where nbgrader_config.py is), with the submissions collected in
submitted/<student>/<assignment>/. The students are graded by nbgrader itself, with the course's
configuration (each submission in its sandbox), many in one ``nbgrader autograde`` process, so
that nbgrader's own start, and a kernel started cold, are paid once a group rather than once a
student. A student whose autograded notebook is newer than the submission is skipped unless
``--force`` is given, so an interrupted run picks up where it stopped. It prints a line per
student as soon as that student is done (time, score, failed and timed-out test cells, whether
the sandbox stopped the notebook, and whether its code was flagged for tampering) with an
estimate of the time left, and a summary at the end. A submission nbgrader could not grade (its
kernel died before replying, its notebook could not be read, or its outcome was the grader's
fault: see grading/ungraded.py) is listed as NOT GRADED, with why, and the exit status is 1:
whatever score the gradebook shows for it is not a grade. If a kernel started as submissions' are
cannot grade the course (grading/preflight.py), nothing is graded: the command prints what is
wrong and the fix, and exits with status 2. The gradebook is shared by the workers: on
SQLite, each waits for the others' writes rather than failing. On Linux, each worker's notebooks
run on cores of their own (this process's cores dealt out among the workers), so that J kernels
do not each start as many threads as the machine has cores.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .preflight import STOPPED
from .release import nbgrader_environment
from .watchdog import UNCOUNTED_CPU

MAX_GROUP = 25  # students graded by one nbgrader process at most
# What nbgrader logs while grading a student it then gives up on. (At the end, it names each
# such student again: "There was an error processing assignment '...' for student '...'".)
GAVE_UP = ("There was an error processing assignment:", "the kernel became unresponsive")
NOT_GRADED = "NOT GRADED: "  # how the grading sandbox logs a notebook it ran but could not grade


class GradingStopped(Exception):
    """Grading stopped before the first submission (see grading/preflight.py): the message
    says what was expected, what was found, and the fix."""


@dataclass
class Outcome:
    """How grading one student went."""

    student: str
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    not_graded: str | None = None  # why nbgrader could not grade the submission, if it could not
    log: str = ""
    score: float | None = None
    max_score: float | None = None
    failed_tests: list[str] = field(default_factory=list)
    timed_out: list[str] = field(default_factory=list)
    tampering: list[str] = field(default_factory=list)  # what FlagTampering logged
    stopped: str | None = None  # why the sandbox stopped the notebook, if it did

    @property
    def graded(self) -> bool:
        return self.not_graded is None


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
    configs = [root / "nbgrader_config.py", root / "grading" / "nbgrader_config.py"]
    if any(
        "db_url" in line.split("#")[0] for c in configs if c.exists() for line in c.read_text().splitlines()
    ):
        return []  # the instructor chose a database: leave it alone
    return [f"--CourseDirectory.db_url=sqlite:///{root / 'gradebook.db'}?timeout=60"]


def groups_of(students: list[str], jobs: int) -> list[list[str]]:
    """The students in groups, each graded by one ``nbgrader autograde`` process, which pays
    nbgrader's start and a kernel started cold (5 s on two cores) once a group.

    One worker grades everyone in one process (at most MAX_GROUP students a process); several
    share out about two groups each, so that a worker that drew slow notebooks is helped by the
    others."""
    count = max(1 if jobs <= 1 else 2 * jobs, math.ceil(len(students) / MAX_GROUP))
    size = max(1, math.ceil(len(students) / count))
    return [students[i : i + size] for i in range(0, len(students), size)]


def core_sets(jobs: int) -> list[set[int]]:
    """This process's cores dealt out among ``jobs`` workers (round the machine again where there
    are more workers than cores); none where the system cannot pin processes to cores."""
    if not hasattr(os, "sched_setaffinity") or jobs < 2:
        return []
    cores = sorted(os.sched_getaffinity(0))
    if jobs >= len(cores):
        return [{cores[i % len(cores)]} for i in range(jobs)]
    return [set(cores[i::jobs]) for i in range(jobs)]


def grade_group(
    root: Path,
    assignment: str,
    students: list[str],
    everyone: list[str],
    options: list[str] = (),
    cores: set[int] | None = None,
    report: Callable[[Outcome], None] = lambda outcome: None,
) -> list[Outcome]:
    """``nbgrader autograde`` for a few students, one after another, in one process (on
    ``cores`` only, if given). ``report`` gets each student's outcome as soon as nbgrader has
    moved on from them; their CPU seconds are filled in once the process has ended."""
    command = [sys.executable, "-m", "nbgrader", "autograde", assignment, *_database_url(root), *options]
    others = [s for s in everyone if s not in students]
    command += [f"--CourseDirectory.student_id_exclude={','.join(others)}"] if others else []
    if any(_graded_before(root, assignment, s) for s in students):
        command.append("--force")
    start = time.perf_counter()
    process = subprocess.Popen(
        command,
        cwd=root,
        env=nbgrader_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if cores:
        # Before nbgrader has imported itself, let alone started a kernel, which inherits it.
        with contextlib.suppress(ProcessLookupError):  # (an nbgrader that failed at once)
            os.sched_setaffinity(process.pid, cores)
    outcomes: dict[str, Outcome] = {}
    lines: dict[str, list[str]] = {s: [] for s in students}
    began: dict[str, float] = {}
    log: list[str] = []

    def finish(student: str, end: float, crashed: str | None = None) -> None:
        own = "".join(lines[student])
        outcome = Outcome(student, end - began.get(student, end), log=_tail(own or "".join(log)))
        if student not in began:
            outcome.not_graded = "nbgrader stopped before it came to this student"
        elif crashed or any(words in own for words in GAVE_UP):
            outcome.not_graded = crashed or why_not_graded(own)
        outcome.tampering = [
            line.split("tampering detected in ", 1)[1].strip()
            for line in own.splitlines()
            if "tampering detected in " in line
        ]
        outcomes[student] = outcome
        report(outcome)

    # nbgrader logs "Creating/updating student with ID 'x'" as it starts on each student, once it
    # has written everything of the student before. The first student pays nbgrader's start.
    current: str | None = None
    with process.stdout:
        for line in process.stdout:
            log.append(line)
            if "Creating/updating student with ID '" in line:
                now = time.perf_counter()
                if current is not None:
                    finish(current, now)
                current = line.split("ID '", 1)[1].split("'", 1)[0]
                began[current] = now if began else start
            if current in lines:
                lines[current].append(line)
    # wait4 gives this process's own CPU time (its kernels and ranks included, but for what a
    # sandbox's end killed, which its log gives), where os.times() would mix in the other
    # workers' processes that ended meanwhile.
    _, status, usage = os.wait4(process.pid, 0)
    end, cpu = time.perf_counter(), usage.ru_utime + usage.ru_stime
    code = os.waitstatus_to_exitcode(status)
    whole_log = "".join(log)
    if STOPPED in whole_log:
        raise GradingStopped(_record(whole_log, STOPPED))
    if current in lines:
        finish(current, end, crashed=None if code in (0, 1) else f"nbgrader exited with status {code}")
    for student in students:
        if student not in outcomes:  # nbgrader never came to them
            finish(student, end)
        if f"for student '{student}'" in whole_log and outcomes[student].graded:  # named at the end
            outcomes[student].not_graded = why_not_graded("".join(lines[student]))
        outcomes[student].cpu_seconds = cpu * outcomes[student].seconds / max(end - start, 1e-9)
        outcomes[student].cpu_seconds += _uncounted_cpu("".join(lines[student]))
    return [outcomes[s] for s in students]


def _tail(log: str, size: int = 3000) -> str:
    """The end of a log, from the start of a line."""
    return log if len(log) <= size else log[-size:].split("\n", 1)[-1]


def why_not_graded(log: str) -> str:
    """Why nbgrader gave up on a student, from their part of its log: what the grading sandbox
    said (grading/ungraded.py), else the error that ended the traceback nbgrader logged."""
    if NOT_GRADED in log:
        return _record(log, NOT_GRADED)[len(NOT_GRADED) :]
    if "the kernel became unresponsive" in log:
        return "the kernel became unresponsive, and could not be interrupted"
    lines = log.splitlines()
    starts = [i for i, line in enumerate(lines) if "Traceback (most recent call last):" in line]
    if starts:
        block = []
        for line in lines[starts[-1] + 1 :]:
            if line.startswith("[") and " | " in line:  # nbgrader's next log record
                break
            block.append(line.removeprefix("    "))  # (nbgrader's log indents a record's later lines)
        last = [line for line in block if line.strip() and not line.startswith((" ", "\t"))]
        if last:
            return last[-1].strip()[:500]
    return "nbgrader could not grade it (see its log below)"


def _record(log: str, words: str) -> str:
    """The log record that contains ``words``, from them on, with the lines that continue it."""
    lines = log.splitlines()
    first = next(i for i, line in enumerate(lines) if words in line)
    record = [lines[first][lines[first].index(words) :]]
    for line in lines[first + 1 :]:
        if line.startswith("[") and " | " in line:
            break
        record.append(line)
    return "\n".join(record).rstrip()


def _uncounted_cpu(log: str) -> float:
    """The CPU seconds of sandboxed processes that wait4 cannot see: killed with their sandbox
    (grading/sandbox.py logs them)."""
    return sum(
        float(line.split(UNCOUNTED_CPU, 1)[1].split()[0])
        for line in log.splitlines()
        if UNCOUNTED_CPU in line
    )


def read_results(root: Path, assignment: str, outcome: Outcome) -> None:
    """The student's score, and which test cells failed or ran out of time, from the gradebook and
    the autograded notebooks."""
    import nbformat
    from nbgrader.api import Gradebook, MissingEntry

    # (While a worker may be writing: wait for it, as the workers wait for each other.)
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}?timeout=60") as gradebook:
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
            # The sandbox (grading/sandbox.py) says why it stopped a notebook.
            stops = [o["evalue"] for o in errors if o.get("ename") in ("KernelStopped", "NotebookTimeout")]
            outcome.stopped = outcome.stopped or (stops[0] if stops else None)


def describe(outcome: Outcome) -> str:
    if not outcome.graded:
        return f"{outcome.student}: NOT GRADED after {outcome.seconds:.1f} s: {outcome.not_graded}"
    score = "" if outcome.score is None else f"{outcome.score:g}/{outcome.max_score:g}"
    extra = f"; failed: {', '.join(outcome.failed_tests)}" if outcome.failed_tests else ""
    extra += f"; timed out: {', '.join(outcome.timed_out)}" if outcome.timed_out else ""
    extra += "; FLAGGED for tampering" if outcome.tampering else ""
    extra += f"; {outcome.stopped}" if outcome.stopped else ""
    return f"{outcome.student}: {score} in {outcome.seconds:.1f} s{extra}"


def grade_class(
    root: Path,
    assignment: str,
    jobs: int = 1,
    force: bool = False,
    students: list[str] | None = None,
    options: list[str] = (),
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
    free: queue.Queue[set[int] | None] = queue.Queue()
    for cores in core_sets(jobs) or [None] * max(1, jobs):
        free.put(cores)

    finished: queue.Queue[Outcome | BaseException | None] = queue.Queue()
    stopping = threading.Event()  # a group failed in a way that stops the class: start no other

    def grade_on_free_cores(group: list[str]) -> None:
        cores = free.get()  # a worker's cores, while it grades this group
        try:
            if not stopping.is_set():
                grade_group(root, assignment, group, everyone, options, cores, report=finished.put)
        except BaseException as error:  # noqa: BLE001 - raised again in the main thread
            stopping.set()
            finished.put(error)
        finally:
            free.put(cores)
            finished.put(None)  # this group is done

    groups = groups_of(todo, jobs)
    error: BaseException | None = None
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        for group in groups:
            pool.submit(grade_on_free_cores, group)
        running = len(groups)
        while running:
            item = finished.get()
            if item is None:
                running -= 1
                continue
            if isinstance(item, BaseException):
                error = error or item  # (the groups already running finish first)
                continue
            read_results(root, assignment, item)
            outcomes.append(item)
            n, elapsed = len(outcomes), time.perf_counter() - start
            left = elapsed / n * (len(todo) - n)
            print(f"[{n}/{len(todo)}, about {left:.0f} s left] {describe(item)}", flush=True)
    if error is not None:
        raise error
    summarise(outcomes, time.perf_counter() - start)
    return outcomes


def summarise(outcomes: list[Outcome], wall: float) -> None:
    if not outcomes:
        print("nothing to grade")
        return
    cpu = sum(o.cpu_seconds for o in outcomes) / len(outcomes)
    graded = sum(o.graded for o in outcomes)
    print(
        f"graded {graded} of {len(outcomes)} in {wall:.0f} s "
        f"({wall / len(outcomes):.1f} s each, {cpu:.1f} CPU s each)"
    )
    not_graded = [o for o in outcomes if not o.graded]
    timed_out = [o for o in outcomes if o.timed_out]
    flagged = [o for o in outcomes if o.tampering]
    stopped = [o for o in outcomes if o.stopped]
    for title, group in (
        ("cells ran out of time for", timed_out),
        ("the sandbox stopped the notebooks of", stopped),
    ):
        if group:
            print(f"{title}: {', '.join(o.student for o in group)}")
    if flagged:
        print("flagged for tampering (look at these notebooks; their later tests scored zero):")
        for o in flagged:
            print("  " + "\n  ".join(o.tampering))
    if not_graded:
        names = " ".join(o.student for o in not_graded)
        print(
            f"NOT GRADED: {len(not_graded)} submission(s). A score the gradebook shows for them is not a "
            f"grade. Fix the cause, then grade them again with --force --students {names}"
        )
        for o in not_graded:
            print(f"  {o.student}: {o.not_graded}")
    for o in not_graded:
        print(f"--- {o.student}: nbgrader's log ---\n{o.log}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("assignment")
    parser.add_argument("--jobs", "-j", type=int, default=1, help="students graded at once (default 1)")
    parser.add_argument("--force", action="store_true", help="grade again students already graded")
    parser.add_argument("--students", nargs="+", help="only these students")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the course directory (default: here)")
    parser.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run submissions outside the sandbox: only for code you trust (see grading/sandbox.py)",
    )
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if not (root / "nbgrader_config.py").exists():
        print(f"{root} has no nbgrader_config.py: run this from the course directory.", file=sys.stderr)
        return 2
    from .sandbox import INSTALL, bwrap_problem  # here: it imports nbgrader, which takes seconds

    options = []
    if args.no_sandbox:
        options = ["--SandboxedExecute.sandbox=False"]
        print("Grading WITHOUT a sandbox: submissions can read the solutions and change the gradebook.")
    elif (problem := bwrap_problem("bwrap")) is not None:
        print(f"Grading runs each submission in a sandbox, and {problem} {INSTALL}", file=sys.stderr)
        print("(Here, the option is --no-sandbox.)", file=sys.stderr)
        return 2
    try:
        outcomes = grade_class(root, args.assignment, args.jobs, args.force, args.students, options)
    except GradingStopped as stopped:
        print(f"{stopped}\nNo submission was graded.", file=sys.stderr)
        return 2
    return 1 if any(not o.graded for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
