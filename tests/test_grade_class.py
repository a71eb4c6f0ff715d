"""Grading a class with grading.grade_class: every student graded by nbgrader, several at a
time, scores in the gradebook, and a second run that grades only what changed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from course import is_test, read
from nbgrader.api import Gradebook
from round_trip import SANDBOX_OPTIONS, class_of, hand_in

from grading import grade_class
from grading.grade_class import core_sets, groups_of, main
from grading.preflight import STOPPED
from grading.watchdog import UNCOUNTED_CPU

ASSIGNMENT = "01-memory-hierarchy"
NO_SANDBOX = ["--no-sandbox"] if SANDBOX_OPTIONS else []  # where bubblewrap is missing


def scores(root: Path) -> dict[str, float]:
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        return {s.student.id: s.score for s in gradebook.find_assignment(ASSIGNMENT).submissions}


def course_with(released_course: Path, tmp_path: Path, names: list[str]) -> Path:
    """A copy of the released course, with these students' notebooks of ASSIGNMENT handed in."""
    root = tmp_path / "course"
    shutil.copytree(released_course, root)
    students = {s.name: s for s in class_of(ASSIGNMENT)}
    for name in names:
        hand_in(root, students[name])
    return root


def test_a_class_is_graded_in_parallel_and_resumed(
    released_course: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    root = course_with(released_course, tmp_path, ["solutions", "untouched", "wrong-0"])

    assert main([ASSIGNMENT, "--jobs", "2", "--root", str(root), *NO_SANDBOX]) == 0
    printed = capsys.readouterr().out
    assert "3 to grade, 2 at a time" in printed and "[3/3" in printed and "graded 3 of 3 in" in printed
    graded = scores(root)
    release = read(root / "notebooks" / ASSIGNMENT / "memory_hierarchy.ipynb")
    maximum = sum(c.metadata["nbgrader"].get("points", 0) for c in release.cells if is_test(c))
    assert graded["solutions"] == maximum > 0
    assert graded["untouched"] == 0
    assert 0 < graded["wrong-0"] < maximum
    assert "failed: test_" in printed  # the wrong answers' test cells, by name

    # Run again: nothing to do. Hand one student's notebook in again: only that one is graded.
    assert main([ASSIGNMENT, "--root", str(root), *NO_SANDBOX]) == 0
    assert "0 to grade, 1 at a time (3 graded already)" in capsys.readouterr().out
    resubmitted = next((root / "submitted" / "untouched" / ASSIGNMENT).glob("*.ipynb"))
    later = time.time() + 5
    os.utime(resubmitted, (later, later))
    assert main([ASSIGNMENT, "--root", str(root), *NO_SANDBOX]) == 0
    assert "1 to grade, 1 at a time (2 graded already)" in capsys.readouterr().out

    with pytest.raises(SystemExit, match="nobody"):
        main([ASSIGNMENT, "--root", str(root), "--students", "nobody", *NO_SANDBOX])


def test_one_worker_grades_everyone_in_one_nbgrader_and_reports_each_when_done(
    released_course: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = course_with(released_course, tmp_path, ["solutions", "wrong-0"])
    groups, reported = [], {}
    real = grade_class.grade_group

    def recorded(*args: object, report: object, **kwargs: object) -> list:
        def report_when(outcome: grade_class.Outcome) -> None:
            reported[outcome.student] = time.perf_counter()
            report(outcome)

        outcomes = real(*args, report=report_when, **kwargs)
        groups.append((args[2], time.perf_counter()))
        return outcomes

    monkeypatch.setattr(grade_class, "grade_group", recorded)
    start = time.perf_counter()
    outcomes = grade_class.grade_class(root, ASSIGNMENT, jobs=1, options=SANDBOX_OPTIONS)
    [(group, ended)] = groups
    assert group == ["solutions", "wrong-0"]
    # The first was reported while nbgrader went on with the second, which takes seconds.
    assert reported["solutions"] < ended - 1 and reported["wrong-0"] <= ended
    assert [o.student for o in outcomes] == group and all(o.graded for o in outcomes)
    assert outcomes[0].score > outcomes[1].score
    assert sum(o.seconds for o in outcomes) == pytest.approx(ended - start, abs=1.0)
    assert all(o.cpu_seconds > 0.5 for o in outcomes)  # the kernels' CPU time is counted


def test_students_are_shared_out_in_groups() -> None:
    class_of_60 = [f"s{n:02d}" for n in range(60)]
    for students, jobs, sizes in [
        (class_of_60[:20], 1, [20]),
        (class_of_60, 1, [20, 20, 20]),  # at most 25 a group
        (class_of_60[:20], 2, [5, 5, 5, 5]),  # about two groups a worker
        (class_of_60[:3], 2, [1, 1, 1]),
        (class_of_60[:20], 16, [1] * 20),
        ([], 1, []),
    ]:
        groups = groups_of(students, jobs)
        assert [len(g) for g in groups] == sizes, (len(students), jobs)
        assert [s for g in groups for s in g] == students


def test_a_class_is_not_graded_without_a_sandbox_unless_asked(
    released_course: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = course_with(released_course, tmp_path, ["untouched"])
    monkeypatch.setattr("grading.sandbox.bwrap_problem", lambda bwrap: "bubblewrap is not installed.")
    assert main([ASSIGNMENT, "--root", str(root)]) == 2
    assert "Install bubblewrap" in capsys.readouterr().err
    assert not (root / "autograded").exists()


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="pins workers to cores on Linux only")
def test_each_worker_gets_cores_of_its_own() -> None:
    cores = os.sched_getaffinity(0)
    assert core_sets(1) == []  # one worker: all of them, unpinned
    for jobs in range(2, len(cores) + 1):
        sets = core_sets(jobs)
        assert len(sets) == jobs and set().union(*sets) == cores
        assert sum(len(s) for s in sets) == len(cores)  # no core dealt twice
    more = core_sets(len(cores) + 3)
    assert len(more) == len(cores) + 3 and all(len(s) == 1 and s <= cores for s in more)


def test_each_students_outcome_is_read_from_their_part_of_nbgraders_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # nbgrader gives up on ada (her kernel died) and cy (the sandbox found the course's setup
    # failed), grades bob, and names ada and cy again at the end.
    log = [
        "[AutogradeApp | INFO] Creating/updating student with ID 'ada': {}",
        "[AutogradeApp | ERROR] There was an error processing assignment: submitted/ada/01",
        "[AutogradeApp | ERROR] Traceback (most recent call last):",
        '      File "nbclient/client.py", line 600, in async_start_new_kernel_client',
        "        await ensure_async(self.kc.wait_for_ready(timeout=self.startup_timeout))",
        "    RuntimeError: Kernel died before replying to kernel_info",
        "    ",
        "[AutogradeApp | INFO] Creating/updating student with ID 'bob': {}",
        "[AutogradeApp | WARNING] tampering detected in test_units: it replaces expect_close",
        f"[AutogradeApp | INFO] Sandbox: at most 9 processes and threads; {UNCOUNTED_CPU} 2.50 s",
        "[AutogradeApp | INFO] Creating/updating student with ID 'cy': {}",
        "[AutogradeApp | ERROR] NOT GRADED: the course's own cell 2 failed before the student's code ran",
        "[AutogradeApp | ERROR] There was an error processing assignment: submitted/cy/01",
        "[AutogradeApp | ERROR] There was an error processing assignment '01' for student 'ada'",
        "[AutogradeApp | ERROR] There was an error processing assignment '01' for student 'cy'",
    ]
    script = f"import sys, time\nfor line in {log!r}:\n    print(line, flush=True)\n    time.sleep(0.2)\n"
    script += "sys.exit(1)"
    real = subprocess.Popen
    monkeypatch.setattr(subprocess, "Popen", lambda command, **kw: real([sys.executable, "-c", script], **kw))
    reported: list[str] = []
    ada, bob, cy = grade_class.grade_group(
        tmp_path,
        "01",
        ["ada", "bob", "cy"],
        ["ada", "bob", "cy"],
        report=lambda o: reported.append(o.student),
    )
    assert reported == ["ada", "bob", "cy"]
    assert ada.not_graded == "RuntimeError: Kernel died before replying to kernel_info" and not ada.tampering
    assert bob.graded and bob.tampering == ["test_units: it replaces expect_close"]
    assert cy.not_graded == "the course's own cell 2 failed before the student's code ran"
    assert bob.cpu_seconds >= 2.5 > ada.cpu_seconds  # the sandbox's logged CPU time is bob's


def test_grading_stopped_before_the_first_student_is_raised_with_its_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = [
        f"[AutogradeApp | ERROR] {STOPPED}: a kernel started as submissions' are did not start.",
        "    Fix: raise SandboxedExecute.max_memory",
    ]
    script = f"import sys\nfor line in {log!r}:\n    print(line)\nsys.exit(1)"
    real = subprocess.Popen
    monkeypatch.setattr(subprocess, "Popen", lambda command, **kw: real([sys.executable, "-c", script], **kw))
    with pytest.raises(grade_class.GradingStopped) as stopped:
        grade_class.grade_group(tmp_path, "01", ["ada"], ["ada"])
    assert str(stopped.value).startswith(STOPPED) and "Fix: raise SandboxedExecute.max_memory" in str(
        stopped.value
    )
