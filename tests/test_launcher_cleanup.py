"""Nothing outlives a launch: not the programs its ranks start, not the shared memory they
forget, not the folders of a process that was killed before it could remove them."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import psutil
import pytest

from launcher import folders, launch

REPO = Path(__file__).resolve().parent.parent

# Forks, and the child leaves its parent's session; the parent exits at once: a daemon.
DAEMON = """
import os, time
if os.fork():
    os._exit(0)
os.setsid()
print(os.getpid(), flush=True)
time.sleep(60)
"""


def _start_programs_that_leave_the_rank(rank: int, world_size: int) -> list[int]:
    session = subprocess.Popen(["sleep", "60"], start_new_session=True)
    daemon = subprocess.Popen([sys.executable, "-c", DAEMON], stdout=subprocess.PIPE)
    grandchild = int(daemon.stdout.readline())
    daemon.wait()
    return [session.pid, grandchild]


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="orphans are adopted on Linux only")
def test_programs_that_leave_the_ranks_session_do_not_outlive_the_launch() -> None:
    pids = [pid for rank_pids in launch(_start_programs_that_leave_the_rank, 2) for pid in rank_pids]
    assert [pid for pid in pids if _running(pid)] == []
    assert not any(psutil.pid_exists(pid) for pid in pids)  # reaped too, not left as zombies


def _forget_shared_memory(rank: int, world_size: int) -> tuple[str, str]:
    from multiprocessing import shared_memory

    forgotten = shared_memory.SharedMemory(create=True, size=1 << 16)
    forgotten.close()  # but never unlinked
    tidy = shared_memory.SharedMemory(create=True, size=1 << 16)
    tidy.close()
    tidy.unlink()
    return forgotten.name, tidy.name


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="needs /dev/shm to look in")
def test_shared_memory_a_rank_forgets_to_unlink_is_removed_as_plain_python_does() -> None:
    with pytest.warns(UserWarning, match="left the shared memory") as warned:
        names = launch(_forget_shared_memory, 2)
    assert len(warned) == 2  # one per forgotten segment; none for the tidy ones
    assert [forgotten for forgotten, _ in names if os.path.exists(f"/dev/shm/{forgotten}")] == []


def _launch_folder(base: str, lock: bool = True) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="launch-4242-", dir=base))
    (folder / "store").write_text("left by a kernel that was killed")
    if lock:
        (folder / "lock").touch()
    return folder


def test_folders_no_launch_holds_are_removed_at_the_next_start(monkeypatch) -> None:
    base = tempfile.gettempdir()
    stale, not_ours, held = _launch_folder(base), _launch_folder(base, lock=False), _launch_folder(base)
    holder = os.open(held / "lock", os.O_RDWR)  # as a launch running in another process holds it
    fcntl.flock(holder, fcntl.LOCK_EX)
    monkeypatch.setattr(folders, "_stale_removed", False)  # as in a fresh process
    try:
        launch(lambda rank, world_size: rank, 1)
        assert not stale.exists() and not_ours.exists() and held.exists()
    finally:
        os.close(holder)
        for folder in (stale, not_ours, held):
            shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="looks for the launch's folder in /dev/shm")
def test_a_process_killed_in_the_middle_of_a_launch_leaves_nothing_behind(tmp_path: Path) -> None:
    script = tmp_path / "killed.py"
    script.write_text(
        textwrap.dedent(
            """
            import time
            from launcher import launch
            launch(lambda rank, world_size: print("ranks running", flush=True) or time.sleep(60), 2)
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, env=env, text=True)
    assert "ranks running" in process.stdout.readline()
    tree = psutil.Process(process.pid).children(recursive=True)
    left = [
        os.path.join(base, f)
        for base in (folders.SHARED_MEMORY, tempfile.gettempdir())
        for f in os.listdir(base)
        if f.startswith(f"launch-{process.pid}-")
    ]
    assert len(left) == 2  # in /dev/shm and the temp dir
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    _, alive = psutil.wait_procs(tree, timeout=5)
    assert alive == []  # the fork server and the ranks went with it
    # (Not asserted: that the folders are still there now. Any launch starting in another
    # process, such as the grading tests' kernels running beside this test, may sweep them.)
    folders.remove_stale_folders()  # what the next launch does first
    assert not any(os.path.exists(f) for f in left)


def _attach_and_leave(rank: int, world_size: int, name: str) -> int:
    from multiprocessing import shared_memory

    attached = shared_memory.SharedMemory(name=name)  # the notebook's: not this rank's to remove
    size = attached.size
    attached.close()
    return size


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="needs /dev/shm to look in")
def test_shared_memory_a_rank_only_attaches_to_is_left_alone() -> None:
    import warnings
    from multiprocessing import shared_memory

    ours = shared_memory.SharedMemory(create=True, size=4096)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert launch(_attach_and_leave, 2, ours.name) == [4096, 4096]
        assert os.path.exists(f"/dev/shm/{ours.name}")
    finally:
        ours.close()
        ours.unlink()
