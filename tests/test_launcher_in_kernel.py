"""The launcher where students call it: in a real Jupyter kernel, on functions defined in cells."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from kernel import Kernel, assert_only_fork_server, kernel
from machine import expect_within

JUPYTER_EXECUTE = Path(sys.executable).with_name("jupyter-execute")
SETUP = """
import ctypes, json, os, signal, sys, time
import psutil, torch
import torch.distributed as dist
from launcher import LaunchError, LaunchHang, launch
"""


@pytest.fixture(scope="module")
def k() -> Kernel:
    """A kernel whose fork server is already running: the time limits below are for launches
    after a notebook's first (which starts the server; the benchmark measures that one)."""
    with kernel() as k:
        k.ok(SETUP + "launch(lambda rank, world_size: None, 1)\n")
        yield k


def test_lecture_all_reduce_from_a_cell_with_prefixed_output(k: Kernel) -> None:
    run = k.ok(
        """
def all_reduce_demo(rank, world_size):
    t = torch.tensor([0.0, 1, 2, 3]) + rank
    print(f"before {t.tolist()}")
    dist.all_reduce(t)
    print(f"after {t.tolist()}")
    return t

results = launch(all_reduce_demo, world_size=4)
print(json.dumps([[r.tolist(), str(r.device), type(r).__name__] for r in results]))
"""
    )
    assert run.json() == [[[6.0, 10.0, 14.0, 18.0], "cpu", "Tensor"]] * 4
    for rank in range(4):
        assert f"[rank {rank}] before {[float(rank + i) for i in range(4)]}" in run.stdout
        assert f"[rank {rank}] after [6.0, 10.0, 14.0, 18.0]" in run.stdout
    assert_only_fork_server(k)


def test_closures_lambdas_notebook_globals_args_and_kwargs(k: Kernel) -> None:
    run = k.ok(
        """
SCALE = 10  # a notebook global

class Shard:  # a class defined in the notebook
    def __init__(self, rank):
        self.rank = rank
    def value(self):
        return self.rank * SCALE

def make_worker(offset):
    def worker(rank, world_size, base, *, times):  # a closure over offset
        return (base + offset + Shard(rank).value()) * times
    return worker

closure = launch(make_worker(5), 3, 100, times=2)
lam = launch(lambda rank, world_size: [rank, world_size], 3)
print(json.dumps([closure, lam]))
"""
    )
    closure, lam = run.json()
    assert closure == [(100 + 5 + 10 * r) * 2 for r in range(3)]
    assert lam == [[0, 3], [1, 3], [2, 3]]


def test_c_level_writes_and_stderr_reach_the_cell(k: Kernel) -> None:
    run = k.ok(
        """
def noisy(rank, world_size):
    os.write(1, f"written to fd 1 by {rank}\\n".encode())
    ctypes.CDLL(None).printf(b"printf from %d\\n", rank)
    print(f"warning from {rank}", file=sys.stderr)

launch(noisy, 2)
"""
    )
    for rank in range(2):
        assert f"[rank {rank}] written to fd 1 by {rank}" in run.stdout
        assert f"[rank {rank}] printf from {rank}" in run.stdout
        assert f"[rank {rank}] warning from {rank}" in run.stderr


def test_tensors_come_back_detached_on_the_cpu(k: Kernel) -> None:
    run = k.ok(
        """
def grads(rank, world_size):
    w = torch.ones(3, requires_grad=True)
    y = w * (rank + 1)  # not a leaf: plain pickle refuses it
    return {"w": w, "y": y, "nested": [y, (y,)]}

out = launch(grads, 2)
print(json.dumps([[o["y"].tolist(), o["y"].requires_grad, str(o["nested"][1][0].device)] for o in out]))
"""
    )
    assert run.json() == [[[1.0, 1.0, 1.0], False, "cpu"], [[2.0, 2.0, 2.0], False, "cpu"]]


def test_a_raising_rank_fails_fast_naming_every_failed_rank(k: Kernel) -> None:
    run = k.ok(
        """
def fails(rank, world_size):
    if rank in (1, 3):
        raise ValueError(f"bad shard on rank {rank}")
    dist.barrier()

t0 = time.perf_counter()
try:
    launch(fails, 4, timeout=30)
except LaunchError as e:
    err = e
print(json.dumps({
    "elapsed": time.perf_counter() - t0,
    "ranks": [f.rank for f in err.failures],
    "types": [type(f.exception).__name__ for f in err.failures],
    "args": [f.exception.args[0] for f in err.failures],
    "message": str(err),
}))
"""
    )
    report = run.json()
    expect_within(report["elapsed"], 2.0, "the launch")
    assert report["ranks"] == [1, 3]
    assert report["types"] == ["ValueError", "ValueError"]
    assert report["args"] == ["bad shard on rank 1", "bad shard on rank 3"]
    message = report["message"]
    assert "rank 1 of 4 raised ValueError: bad shard on rank 1" in message
    assert "rank 3 of 4 raised ValueError: bad shard on rank 3" in message
    assert "ranks 0, 2 were stopped" in message
    # The remote traceback points at the notebook cell and shows the user's own line.
    assert "Cell In[" in message
    assert 'raise ValueError(f"bad shard on rank {rank}")' in message
    assert_only_fork_server(k)


def test_an_uncaught_failure_shows_the_users_line_in_the_cell(k: Kernel) -> None:
    run = k.run(
        """
def divide(rank, world_size):
    return 1 / (rank - 1)

launch(divide, 3)
"""
    )
    assert run.error is not None and run.error["ename"] == "LaunchError"
    assert "rank 1 of 3 raised ZeroDivisionError: division by zero" in run.error["traceback"]
    assert "return 1 / (rank - 1)" in run.error["traceback"]
    assert_only_fork_server(k)


@pytest.mark.parametrize(
    "body, expected, exitcode",
    [
        ("os._exit(3)", "rank 2 of 4 exited with code 3 before returning", 3),
        ("os.kill(os.getpid(), signal.SIGSEGV)", "rank 2 of 4 was killed by signal SIGSEGV", -11),
    ],
)
def test_a_rank_that_dies_is_named_with_its_exit_code_or_signal(
    k: Kernel, body: str, expected: str, exitcode: int
) -> None:
    run = k.ok(
        f"""
def dies(rank, world_size):
    if rank == 2:
        {body}
    dist.barrier()

t0 = time.perf_counter()
try:
    launch(dies, 4)
except LaunchError as e:
    err = e
print(json.dumps({{"elapsed": time.perf_counter() - t0, "message": str(err),
                  "codes": [f.exitcode for f in err.failures]}}))
"""
    )
    report = run.json()
    expect_within(report["elapsed"], 2.0, "the launch")
    assert expected in report["message"]
    assert report["codes"] == [exitcode]
    assert_only_fork_server(k)


# The lecture's hang: rank 0 in all_reduce while the others broadcast.
MISMATCH = """
def mismatch(rank, world_size):
    t = torch.ones(4)
    if rank == 0:
        dist.all_reduce(t)
    else:
        dist.broadcast(t, src=0)
"""


def test_mismatched_collectives_are_named_by_torch_at_once(k: Kernel) -> None:
    run = k.ok(
        MISMATCH
        + """
t0 = time.perf_counter()
try:
    launch(mismatch, 4, timeout=10)
except LaunchError as e:
    err = e
print(json.dumps({"elapsed": time.perf_counter() - t0, "message": str(err), "type": type(err).__name__}))
"""
    )
    report = run.json()
    assert report["type"] == "LaunchError"
    expect_within(report["elapsed"], 3.0, "reporting the error")
    message = report["message"]
    assert "rank 0 called all_reduce (1st collective, shape [4], Float)" in message
    assert "rank 1 called broadcast (1st collective, shape [4], Float)" in message
    assert "dist.all_reduce(t)" in message and "dist.broadcast(t, src=0)" in message
    assert_only_fork_server(k)


def test_a_hang_reports_where_each_rank_is_stuck(k: Kernel) -> None:
    run = k.ok(
        MISMATCH
        + """
t0 = time.perf_counter()
try:
    launch(mismatch, 4, timeout=3, check_collectives=False)
except LaunchHang as e:
    err = e
print(json.dumps({"elapsed": time.perf_counter() - t0, "message": str(err), "stacks": err.stacks}))
"""
    )
    report = run.json()
    assert report["elapsed"] >= 3.0
    expect_within(report["elapsed"], 3.0 + 2.0, "reporting the hang after its 3 s timeout")
    message = report["message"]
    assert "rank 0 is waiting in all_reduce:" in message
    assert "rank 3 is waiting in broadcast(src=0):" in message
    assert "blocked in different collectives (all_reduce on rank 0, broadcast on ranks 1, 2, 3)" in message
    assert "Cell In[" in report["stacks"]["0"] and "dist.all_reduce(t)" in report["stacks"]["0"]
    assert "dist.broadcast(t, src=0)" in report["stacks"]["2"]
    assert_only_fork_server(k)


def test_a_recv_that_nobody_sends_to_is_found_long_before_the_timeout(k: Kernel) -> None:
    run = k.ok(
        """
def lonely_recv(rank, world_size):
    t = torch.zeros(2)
    if rank == 1:
        dist.recv(t, src=0)
    return rank

t0 = time.perf_counter()
try:
    launch(lonely_recv, 2, timeout=30)
except LaunchHang as e:
    err = e
elapsed = time.perf_counter() - t0
print(json.dumps({"elapsed": elapsed, "message": str(err), "timeout": isinstance(err, TimeoutError)}))
"""
    )
    report = run.json()
    assert report["timeout"]
    expect_within(report["elapsed"], 3.0, "reporting the deadlock")
    message = report["message"]
    assert "rank 1 waits in recv(src=0) for rank 0, which already returned." in message
    assert "rank 0 returned" in message
    assert "rank 1 is waiting in recv(src=0):" in message
    assert "Cell In[" in message and "dist.recv(t, src=0)" in message
    assert_only_fork_server(k)


def test_a_check_whose_ranks_deadlock_shows_the_report_once(k: Kernel) -> None:
    run = k.run(
        """
from autograder import run_ranks

def lonely_recv(rank, world_size):
    if rank == 1:
        dist.recv(torch.zeros(2), src=0)

run_ranks(lonely_recv, 2)
"""
    )
    assert run.error is not None and run.error["ename"] == "CheckFailed"
    traceback = run.error["traceback"]
    assert "lonely_recv on 2 ranks failed:" in traceback
    assert traceback.count("rank 1 waits in recv(src=0) for rank 0, which already returned.") == 1
    assert "During handling" not in traceback and "LaunchHang" not in traceback
    assert len(traceback.splitlines()) < 30, traceback


def test_interrupting_the_kernel_stops_every_rank(k: Kernel) -> None:
    k.ok("launch(lambda rank, world_size: rank, 4)")  # the fork server is warm
    interrupt_after = 3
    run = k.run(
        """
_t0 = time.monotonic()
try:
    launch(lambda rank, world_size: time.sleep(60), 4, timeout=120)
finally:
    _elapsed = time.monotonic() - _t0
""",
        timeout=interrupt_after,
        interrupt_on_timeout=True,
    )
    assert run.error is not None and run.error["ename"] == "KeyboardInterrupt"
    # Said once, to the point: the ranks were stopped; none of the launcher's own frames.
    traceback = run.error["traceback"]
    assert "launch was interrupted: every rank was stopped." in traceback
    assert "During handling" not in traceback
    for internal in ("supervise.py", "selectors.py", "forkserver.py", "wire.py"):
        assert internal not in traceback, traceback
    elapsed = k.ok("print(json.dumps(_elapsed))").json()
    # The interrupt arrives at about interrupt_after seconds; every rank is gone within 2 s.
    expect_within(elapsed, interrupt_after + 2.0, "stopping every rank after the interrupt")
    assert_only_fork_server(k)
    assert k.ok(
        "print(json.dumps([t.tolist() for t in launch(lambda r, w: torch.ones(1) * r, 2)]))"
    ).json() == [
        [0.0],
        [1.0],
    ]


def test_a_hundred_launches_leave_fds_and_threads_flat(k: Kernel) -> None:
    before, after = k.ok(
        """
def snapshot():
    me = psutil.Process()
    return [me.num_fds(), me.num_threads()]

launch(lambda rank, world_size: rank, 4)
before = snapshot()
for _ in range(100):
    launch(lambda rank, world_size: rank, 4)
print(json.dumps([before, snapshot()]))
"""
    ).json()
    assert before == after
    assert_only_fork_server(k)


def test_shutdown_leaves_the_kernel_without_child_processes(k: Kernel) -> None:
    assert k.ok("import launcher; launcher.shutdown()\n" + "import json, psutil\n" + _CHILDREN).json() == []
    assert k.ok("print(json.dumps(launch(lambda rank, world_size: rank, 2)))").json() == [0, 1]


_CHILDREN = "print(json.dumps([p.pid for p in psutil.Process().children(recursive=True)]))"


def test_two_kernels_launching_at_the_same_moment_both_succeed(tmp_path) -> None:
    # Each kernel, once it has imported everything, says so with a file and waits for the other's.
    cell = """
import json, pathlib, time
import torch, torch.distributed as dist
from launcher import launch

def all_reduce_demo(rank, world_size):
    t = torch.tensor([0.0, 1, 2, 3]) + rank
    dist.all_reduce(t)
    return t.tolist()

pathlib.Path("{me}.ready").touch()
while not pathlib.Path("{other}.ready").exists():
    time.sleep(0.001)
print(json.dumps(launch(all_reduce_demo, 4)))
"""
    runs = []
    for name, other in (("a", "b"), ("b", "a")):
        path = tmp_path / f"{name}.ipynb"
        source = cell.format(me=tmp_path / name, other=tmp_path / other)
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)]), path)
        # nbclient's own command line, run from outside the repository.
        command = [str(JUPYTER_EXECUTE), "--timeout=120", f"--output={name}-out", str(path)]
        runs.append(
            (path, subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
        )
    for path, process in runs:
        log = process.communicate(timeout=180)[0].decode()
        assert process.returncode == 0, log
        executed = nbformat.read(path.with_name(path.stem + "-out.ipynb"), as_version=4)
        outputs = executed.cells[0].outputs
        assert json.loads(outputs[-1]["text"]) == [[6.0, 10.0, 14.0, 18.0]] * 4, outputs
