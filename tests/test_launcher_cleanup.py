"""Nothing outlives a launch: not the programs its ranks start, not the shared memory they
forget, not the folders of a process that was killed before it could remove them."""

from __future__ import annotations

import os
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
    with pytest.warns(UserWarning, match="left the shared_memory") as warned:
        names = launch(_forget_shared_memory, 2)
    assert len(warned) == 2  # one per forgotten segment; none for the tidy ones
    assert [forgotten for forgotten, _ in names if os.path.exists(f"/dev/shm/{forgotten}")] == []


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_folders_of_a_process_that_died_are_removed_at_the_next_start(monkeypatch) -> None:
    base = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    stale = Path(tempfile.mkdtemp(prefix=f"launch-{_dead_pid()}-", dir=base))
    (stale / "store").write_text("left by a kernel that was killed")
    alive = Path(tempfile.mkdtemp(prefix=f"launch-{os.getppid()}-", dir=base))  # its process lives
    monkeypatch.setattr(folders, "_stale_removed", False)  # as in a fresh process
    try:
        launch(lambda rank, world_size: rank, 1)
        assert not stale.exists() and alive.exists()
    finally:
        for folder in (stale, alive):
            if folder.exists():
                for item in folder.iterdir():
                    item.unlink()
                folder.rmdir()


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
    left = [f for f in os.listdir(folders.SHARED_MEMORY) if f.startswith(f"launch-{process.pid}-")]
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    _, alive = psutil.wait_procs(tree, timeout=5)
    assert alive == []  # the fork server and the ranks went with it
    assert left and all(os.path.exists(os.path.join(folders.SHARED_MEMORY, f)) for f in left)
    folders.remove_stale_folders()  # what the next launch does first
    assert not any(os.path.exists(os.path.join(folders.SHARED_MEMORY, f)) for f in left)
