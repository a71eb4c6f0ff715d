"""Hostile submissions, graded by plain ``nbgrader autograde`` with the course's configuration.

A small assignment of six tests (1 point each) is handed in by two honest students and by
one student for each attack in tests/hostile_submissions/. Besides the four tests of
tests/small_assignment.py, one times the student's ``measure(clock, work)`` with the checks'
fake clock, and one runs ``second()`` in ranks and checks it there. Each attack is code a
student puts in the answer cell of the second exercise, followed by the right answer (or, with
``answer: wrong``, a wrong one; with ``answer: none``, the attack's own; an honest ``measure``
unless it defines its own); its docstring says how a sound grader grades it:

- ``expect: full``: the attack is contained, and the submission keeps every point;
- ``expect: second fails: <words>``: the attack stops the notebook, so the tests after the
  first score nothing, and the first keeps its point; a failed test says ``<words>``;
- ``expect: clock fails: <words>`` (or ``ranks fails``): only that test scores nothing, and
  says ``<words>``.

The whole class is graded in one nbgrader run, so an attack that stopped or killed the grader,
or changed the gradebook, another student's folder or the course, shows in everyone's grades.
"""

from __future__ import annotations

import ast
import asyncio
import os
import resource
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
import small_assignment
from machine import expect_within, scaled
from nbgrader.api import Gradebook
from small_assignment import ASSIGNMENT, HIDDEN, HIDDEN_NAME, NOTEBOOK, REPO, release, source_notebook

from grading import execute, grade_class, kernel_client, sandbox, spare_kernel
from grading.sandbox import GiB, bwrap_problem
from grading.watchdog import Watchdog

HOSTILE = Path(__file__).parent / "hostile_submissions"
HONEST = ["honest-first", "honest-last"]
SECRET = "grader-token-52d1e8"  # in the grader's environment: must never reach a kernel
MARKER = f"hostile-{uuid.uuid4().hex[:12]}"  # in every process an attack starts


# Short limits, so the attacks that hang or hog cost little: a cell may run 8 s, the notebook
# 12 s (so a hang that ignores interrupts is cut by the budget, not by a timeout per cell), each
# stretched by how slowly the machine runs now (tests/machine.py).
def limits(cell: float = 8, notebook: float = 12) -> list[str]:
    return [
        f"--Execute.timeout={round(scaled(cell))}",
        f"--SandboxedExecute.notebook_timeout={round(scaled(notebook))}",
        f"--SandboxedExecute.max_memory={GiB}",
        "--SandboxedExecute.max_tasks=200",
    ]


FAKE_CHECKS = "def expect_equal(*args, **kwargs):\n    pass\n"
# The test this class has besides the small assignment's, and the rank attacks' class's.
MORE_TESTS = {
    "test_clock": (
        "from autograder.checks import FakeClock, expect_close, expect_equal\n\n"
        "expect_equal(second(), 2, 'second()')\n"
        "clock = FakeClock([0.25])\n"
        "with clock.watch():\n"
        "    seconds = measure(clock, second)\n"
        "clock.expect_all_read('measure(clock, second)')\n"
        "expect_close(seconds, 0.25, 'measure(clock, second)')"
    ),
}
RANK_TESTS = {
    "test_ranks": (
        "from autograder.checks import expect_equal\n"
        "from launcher import launch\n\n\n"
        "def checked(rank, world_size):\n"
        "    expect_equal(second(), 2, f'second() on rank {rank}')\n"
        "    return True\n\n\n"
        "expect_equal(launch(checked, 2), [True, True], 'second(), checked on each of 2 ranks')"
    ),
}
TESTS = ["test_first", "test_second", "test_third", "test_fourth", *MORE_TESTS]
RANK_CLASS_TESTS = [*TESTS[:4], *RANK_TESTS]
MEASURE = (
    "def measure(clock, work):\n"
    "    start = clock()\n"
    "    work()\n"
    "    stop = clock()\n"
    "    return stop - start\n"
)
HONEST_ANSWER = f"def second():\n    return 2\n\n\n{MEASURE}"

pytestmark = pytest.mark.skipif(
    bwrap_problem("bwrap") is not None,
    reason=f"no sandbox here: {bwrap_problem('bwrap')} Install bubblewrap (apt install bubblewrap).",
)


@dataclass
class Attack:
    name: str
    doc: str
    code: str

    @property
    def fields(self) -> dict[str, str]:
        return dict(line.split(": ", 1) for line in self.doc.splitlines() if ": " in line and line[0] != " ")

    @property
    def contained(self) -> bool:
        return self.fields["expect"] == "full"

    @property
    def failing(self) -> str:
        """The test that fails first: ``test_second``, or the one test that fails alone."""
        return "test_" + self.fields["expect"].split(" fails: ")[0]

    @property
    def says(self) -> str:
        return self.fields["expect"].split(" fails: ", 1)[1]

    @property
    def with_ranks(self) -> bool:
        """Whether it is graded in the class whose notebook runs ranks (``class: ranks``)."""
        return self.fields.get("class") == "ranks"

    @property
    def tests(self) -> list[str]:
        return RANK_CLASS_TESTS if self.with_ranks else TESTS


def attacks(with_ranks: bool | None = None) -> list[Attack]:
    """The attacks of tests/hostile_submissions/ (only those of one class, if asked)."""
    found = []
    for path in sorted(HOSTILE.glob("*.py")):
        module = ast.parse(path.read_text())
        doc = ast.get_docstring(module) or ""
        body = module.body[1:]
        found.append(Attack(path.stem, doc, ast.unparse(body) if body else ""))
    return [a for a in found if with_ranks is None or a.with_ranks == with_ranks]


def nbgrader(
    root: Path, *args: str, check: bool = True, tmp: Path | None = None
) -> subprocess.CompletedProcess:
    # (TMPDIR: where the grader makes each kernel's folder, its connection file and sockets.)
    env = {"COURSE_GRADER_TOKEN": SECRET, **({"TMPDIR": str(tmp)} if tmp is not None else {})}
    return small_assignment.nbgrader(root, *args, check=check, env=env)


def hand_in(root: Path, student: str, second: str, beside: list[str] = ()) -> None:
    small_assignment.hand_in(root, student, second, dict.fromkeys(beside, FAKE_CHECKS))


def attack_cell(attack: Attack, root: Path) -> str:
    names = f"COURSE = {str(root)!r}\nASSIGNMENT = {ASSIGNMENT!r}\nMARKER = {MARKER!r}\n"
    answers = {"right": "return 2", "wrong": "return 0", "none": None}
    answer = answers[attack.fields.get("answer", "right")]
    definition = f"\n\n\ndef second():\n    {answer}\n" if answer else "\n"
    measure = "" if "def measure(" in attack.code else f"\n\n{MEASURE}"
    return f"{names}{attack.code}{definition}{measure}"


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> Path:
    return release(tmp_path_factory.mktemp("sandbox") / "course", source_notebook(more_tests=MORE_TESTS))


@dataclass
class GradedClass:
    root: Path
    scores: dict[str, dict[str, float]]  # student -> test -> score
    seconds: float
    log: str

    def outputs(self, student: str) -> dict[str, str]:
        """Each graded or answer cell's outputs in the student's graded notebook, as text."""
        path = self.root / "autograded" / student / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
        nb = nbformat.read(path, as_version=4)
        cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id")]
        return {c.metadata.nbgrader["grade_id"]: str(c.get("outputs", [])) for c in cells}


def grade(root: Path, attacks: list[Attack], timeout: tuple[float, float] = (8, 12)) -> GradedClass:
    """Hand in the honest students' and these attacks' notebooks, and grade them in one nbgrader
    run, with the short limits (a cell's, the notebook's)."""
    hand_in(root, HONEST[0], HONEST_ANSWER)
    for attack in attacks:
        hand_in(root, attack.name, attack_cell(attack, root), attack.fields.get("beside", "").split())
    hand_in(root, HONEST[1], HONEST_ANSWER)
    kernels = root.parent / "kernels"
    kernels.mkdir()
    start = time.perf_counter()
    done = nbgrader(root, "autograde", ASSIGNMENT, *limits(*timeout), tmp=kernels)
    seconds = time.perf_counter() - start
    scores = {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        for student in [*HONEST, *(a.name for a in attacks)]:
            notebook = gradebook.find_submission_notebook(NOTEBOOK, ASSIGNMENT, student)
            scores[student] = {g.name: g.score for g in notebook.grades}
    print(f"\n{len(scores)} hostile and honest submissions graded in {seconds:.0f} s")
    return GradedClass(root, scores, seconds, done.stdout + done.stderr)


@pytest.fixture(scope="module")
def graded(released: Path, tmp_path_factory) -> GradedClass:
    root = tmp_path_factory.mktemp("hostile") / "course"
    shutil.copytree(released, root)
    return grade(root, attacks(with_ranks=False))


@pytest.fixture(scope="module")
def graded_with_ranks(tmp_path_factory) -> GradedClass:
    # A class of its own, whose notebook runs ranks (each notebook then starts a fork server):
    # for the attacks on the ranks' baseline, with limits that leave room for starting them.
    folder = tmp_path_factory.mktemp("hostile-ranks")
    release(folder / "released", source_notebook(more_tests=RANK_TESTS))
    shutil.copytree(folder / "released", folder / "course")
    return grade(folder / "course", attacks(with_ranks=True), timeout=(30, 60))


def test_honest_students_keep_every_point(graded: GradedClass) -> None:
    for student in HONEST:
        assert graded.scores[student] == dict.fromkeys(TESTS, 1.0), graded.outputs(student)


@pytest.mark.parametrize("attack", attacks(), ids=lambda a: a.name)
def test_attack_is_graded_soundly(request: pytest.FixtureRequest, attack: Attack) -> None:
    graded = request.getfixturevalue("graded_with_ranks" if attack.with_ranks else "graded")
    scores, tests = graded.scores[attack.name], attack.tests
    outputs = {k: v for k, v in graded.outputs(attack.name).items() if k.startswith("test_")}
    if attack.contained:
        assert scores == dict.fromkeys(tests, 1.0), outputs
    elif attack.failing == "test_second":
        assert scores == {"test_first": 1.0, **dict.fromkeys(tests[1:], 0.0)}, outputs
        assert any(attack.says in outputs[test] for test in tests[1:]), outputs
    else:
        assert scores == {**dict.fromkeys(tests, 1.0), attack.failing: 0.0}, outputs
        assert attack.says in outputs[attack.failing], outputs


def test_honest_students_keep_every_point_where_ranks_run(graded_with_ranks: GradedClass) -> None:
    for student in HONEST:
        assert graded_with_ranks.scores[student] == dict.fromkeys(RANK_CLASS_TESTS, 1.0), (
            graded_with_ranks.outputs(student)
        )


def test_each_kernel_after_the_first_was_started_while_the_notebook_before_ran(graded: GradedClass) -> None:
    # (Each attack is graded in such a kernel: what the one before did must not reach it.)
    lines = [line for line in graded.log.splitlines() if "Sandbox" in line and "at most" in line]
    assert sum("(the check before grading)" in line for line in lines) == 1  # before the first
    lines = [line for line in lines if "(the check before grading)" not in line]
    assert len(lines) == len(graded.scores)
    assert sum("(kernel started ahead)" in line for line in lines) == len(graded.scores) - 1, lines


def test_a_spare_kernel_imports_what_the_course_cells_import_and_binds_nothing() -> None:
    course = nbformat.v4.new_code_cell(
        "import math\nimport torch.nn as nn\nfrom launcher import launch\nfrom autograder import FakeClock"
    )
    course.metadata.nbgrader = {"locked": True, "grade_id": "setup", "grade": False, "solution": False}
    students = nbformat.v4.new_code_cell("import antigravity")  # a student's cell: not imported ahead
    nb = nbformat.v4.new_notebook(cells=[course, students])
    code = spare_kernel.import_code(nb) + spare_kernel.warm_up_code(nb)
    probe = (
        "import sys\n"
        f"{code}\n"
        "names = sorted(k for k in globals() if not k.startswith('__') and k != 'sys')\n"
        "server = sys.modules['launcher.forkserver']._server\n"
        "warm = 'torch._dynamo' in sys.modules  # what a dispatch mode imports when first entered\n"
        "print(names, 'torch.nn' in sys.modules, 'antigravity' in sys.modules, server.alive(), warm)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, cwd=REPO
    )
    assert done.stdout.split() == ["[]", "True", "False", "True", "True"], done.stdout + done.stderr
    nb.cells[0].source = "import math\nfrom autograder import expect_close"
    assert "forkserver" not in spare_kernel.warm_up_code(nb)  # no launcher: no fork server
    assert "warm_up" not in spare_kernel.warm_up_code(nb)  # no check that needs warming up
    nb.cells[0].metadata.nbgrader["locked"] = False
    assert spare_kernel.import_code(nb) == spare_kernel.warm_up_code(nb) == ""


def test_a_kernel_imports_the_course_cells_modules_before_its_guard_is_installed(monkeypatch) -> None:
    # (Under the guard, each read of a function's code by those imports is an event it judges.)
    started: dict = {}

    async def record(self, **kw):
        started.update(kw)
        return [], kw

    monkeypatch.setattr(sandbox.AsyncKernelManager, "_async_pre_start_kernel", record)
    km = sandbox.CourseKernelManager()
    km.imports_first = "import math\n"
    asyncio.run(km._async_pre_start_kernel(extra_arguments=["--IPKernelApp.exec_lines=warm()"]))
    assert started["extra_arguments"] == [
        "--IPKernelApp.exec_lines=import math\n",
        sandbox.GUARD,
        "--IPKernelApp.exec_lines=warm()",
    ]
    os.remove(started["env"][sandbox.KEY_FILE])


def test_nothing_an_attack_started_is_left_running(graded: GradedClass) -> None:
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        kernel = str(graded.root.parent / "kernels").encode() in cmdline  # a kernel, or a spare
        if (MARKER.encode() in cmdline or kernel) and int(pid) != os.getpid():
            left.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
    assert not left
    assert not list((graded.root.parent / "kernels").iterdir())  # each kernel's folder removed


def test_no_attack_changed_the_course_or_another_students_folder(graded: GradedClass) -> None:
    assert not [p for p in (REPO / "autograder").rglob("*.py") if MARKER in p.read_text()]
    for stage in ("submitted", "autograded"):
        planted = (graded.root / stage).glob(f"*/{ASSIGNMENT}/autograder")
        assert [p.parent.parent.name for p in planted] == ["shadows_checks"]  # its own, handed in


def test_no_secret_reached_a_submission(graded: GradedClass) -> None:
    # What a submission printed, in its answer cell or while a test called it.
    for student in graded.scores:
        for cell, printed in graded.outputs(student).items():
            for secret in (HIDDEN, HIDDEN_NAME, "BEGIN SOLUTION", SECRET, "gradebook.db"):
                assert secret not in printed, (student, cell, secret)
    assert "'HOME'" in graded.outputs("reads_secrets")["second"]  # the attack did run
    assert "line cache:" in graded.outputs("reads_hidden_tests")["test_second"]  # and this one


def test_hangs_and_hogs_cost_little_time(graded: GradedClass) -> None:
    # Without the notebook's budget, ignores_interrupt and stops_itself would each cost 3 cell
    # timeouts (24 s); with it, 12 s. The rest take a few seconds each.
    expect_within(graded.seconds, 12 * 2 + 8 * len(attacks(with_ranks=False)), "grading the hostile class")


def test_grading_stops_where_there_is_no_sandbox(released: Path, tmp_path) -> None:
    root = tmp_path / "course"
    shutil.copytree(released, root)
    hand_in(root, HONEST[0], HONEST_ANSWER)
    done = nbgrader(root, "autograde", ASSIGNMENT, "--SandboxedExecute.bwrap=no-such-bwrap", check=False)
    assert done.returncode != 0
    assert "Install bubblewrap" in done.stdout + done.stderr
    assert not (root / "autograded" / HONEST[0] / ASSIGNMENT).exists()


def test_grading_without_a_sandbox_says_so(released: Path, tmp_path) -> None:
    root = tmp_path / "course"
    shutil.copytree(released, root)
    hand_in(root, HONEST[0], HONEST_ANSWER)
    done = nbgrader(root, "autograde", ASSIGNMENT, "--SandboxedExecute.sandbox=False")
    assert "WITHOUT a sandbox" in done.stdout + done.stderr
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        assert gradebook.find_submission(ASSIGNMENT, HONEST[0]).score == len(TESTS)


def test_the_class_command_reports_what_the_sandbox_stopped(
    released: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "course"
    shutil.copytree(released, root)
    with (root / "nbgrader_config.py").open("a") as config:  # the short limits, as configuration
        config.write("\n" + "\n".join(f"c.{option[2:]}" for option in limits()) + "\n")
    hand_in(root, HONEST[0], HONEST_ANSWER)
    for attack in attacks():
        if attack.name in ("fork_bomb", "hangs_everywhere"):
            hand_in(root, attack.name, attack_cell(attack, root), [])
    # All three in one nbgrader process (a class this small would get one each), so that what
    # its log says is told apart by student.
    monkeypatch.setattr(grade_class, "groups_of", lambda students, jobs: [students])
    assert grade_class.main([ASSIGNMENT, "--root", str(root)]) == 0
    printed = capsys.readouterr().out
    lines = {
        line.split("] ", 1)[1].split(":", 1)[0]: line for line in printed.splitlines() if line.startswith("[")
    }
    assert "5/5 in" in lines[HONEST[0]] and "stopped" not in lines[HONEST[0]]
    assert "processes and threads at once" in lines["fork_bomb"]
    assert (
        "time budget" in lines["hangs_everywhere"] and "timed out: test_second" in lines["hangs_everywhere"]
    )
    assert "the sandbox stopped the notebooks of: fork_bomb, hangs_everywhere" in printed


def test_the_cpu_time_of_what_a_sandbox_kill_ends_is_counted() -> None:
    # In the sandbox, pid 1 starts a server, which starts a rank that uses a second of CPU and
    # is waited for by the server. Killing pid 1 then loses the server's (and so the rank's)
    # time to the grader's wait4: the watchdog counts it before the kill.
    rank = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1: pass"
    server = f"import subprocess, sys, time\nsubprocess.run([sys.executable, '-c', {rank!r}])\ntime.sleep(60)"
    kernel = (
        f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', {server!r}])\ntime.sleep(60)"
    )
    # (The machine's /tmp stays in view, as Python may live there: hence no memory cap to speak of.)
    mounts = ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    bwrap = subprocess.Popen(["bwrap", *sandbox.NAMESPACES, *mounts, sys.executable, "-c", kernel])
    watchdog = Watchdog(bwrap, max_tasks=100, max_memory=2**60, cgroup=None)
    watchdog.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and watchdog.peak_tasks < 2:  # the kernel and its server
        time.sleep(0.1)
    time.sleep(2)  # the rank has run and been waited for by then
    assert watchdog.reason is None and watchdog.init_pid is not None and bwrap.poll() is None
    watchdog.stop(count_cpu=True)  # (which waits for bwrap)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    seen = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    assert bwrap.poll() is not None and seen < 0.9  # what the grader's own accounting sees
    assert 1 <= watchdog.uncounted_cpu_s < 3


def test_gpus_are_hidden_unless_shown(monkeypatch) -> None:
    # (On a GPU machine, tests/test_gpu.py checks what torch then sees inside the sandbox.)
    devices = {"/dev/nvidia*": ["/dev/nvidia0", "/dev/nvidiactl"], "/dev/dri": []}
    monkeypatch.setattr(sandbox.glob, "glob", lambda pattern: devices.get(pattern, []))

    def command(gpus: bool) -> list[str]:
        return sandbox.sandbox_command("bwrap", ["python"], "/tmp/r", [REPO], 0, GiB, gpus=gpus)

    assert "/dev/nvidia0" not in command(False)
    assert command(True).count("--dev-bind") == 2
    env = {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0,1", "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"}
    assert sandbox.sandbox_environment(env)["CUDA_VISIBLE_DEVICES"] == ""
    assert "LD_LIBRARY_PATH" not in sandbox.sandbox_environment(env)
    shown = sandbox.sandbox_environment(env, gpus=True)
    assert (shown["CUDA_VISIBLE_DEVICES"], shown["LD_LIBRARY_PATH"]) == ("0,1", "/usr/local/nvidia/lib64")


def test_the_graders_channels_to_a_kernel_look_for_messages_every_slice(monkeypatch) -> None:
    # A message whose arrival pyzmq's poll missed is found when a slice's poll times out: the
    # grader waits a slice for it, not a cell's whole timeout.
    import asyncio
    from queue import Empty

    from jupyter_client.channels import AsyncZMQSocketChannel

    polls: list[float | None] = []

    async def poll_once(self: object, timeout: float | None = None) -> dict:
        polls.append(timeout)
        await asyncio.sleep(timeout or 0)
        if getattr(self, "arrives", False) and len(polls) == 3:
            return {"msg_type": "execute_reply"}
        raise Empty

    monkeypatch.setattr(AsyncZMQSocketChannel, "get_msg", poll_once)
    monkeypatch.setattr(kernel_client, "POLL_SLICE_S", 0.05)
    channel = object.__new__(kernel_client.PromptChannel)  # (no socket: the poll above is a stand-in)
    channel.arrives = True  # on the third look
    found = asyncio.run(channel.get_msg(timeout=None))
    assert found == {"msg_type": "execute_reply"} and polls == [0.05] * 3
    polls.clear()
    channel.arrives = False
    with pytest.raises(Empty):
        asyncio.run(channel.get_msg(timeout=0.12))
    assert polls[:2] == [0.05, 0.05] and len(polls) == 3 and polls[2] <= 0.03  # then the deadline
    grader = execute.SandboxedExecute()
    grader.nb = nbformat.v4.new_notebook()
    assert grader.create_kernel_manager().client_factory is kernel_client.PromptKernelClient
