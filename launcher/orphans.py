"""The fork server's side of stopping ranks: a rank's process group killed with it, and the
orphans of what the ranks started adopted (Linux's *subreaper*) and killed once every rank of a
launch has ended (launcher/forkserver.py)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """On Linux, adopt the orphans of this process's descendants (see launcher/forkserver.py)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


ORPHANS_WAIT_S = 2.0  # how long killed orphans get to exit; one that will not is left for later


def kill_orphans(ranks: dict[int, tuple[int, int]]) -> None:
    """Kill and reap this process's children that are not ranks: orphans it adopted.

    Killing one can orphan what it started in turn, so look again until none is left. A process
    that does not die at once (stuck in the kernel) is not waited for: the next sweep reaps it."""
    give_up_at = time.monotonic() + ORPHANS_WAIT_S
    while time.monotonic() < give_up_at:
        orphans = [pid for pid in _children() if pid not in ranks]
        if not orphans:
            return
        for pid in orphans:
            kill_group(pid)
        waiting = set(orphans)
        while waiting and time.monotonic() < give_up_at:
            for pid in list(waiting):
                try:
                    done, _ = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    done = pid
                if done:
                    waiting.discard(pid)
            if waiting:
                time.sleep(0.001)


def _children() -> list[int]:
    """This process's children, from Linux's /proc (none elsewhere: nothing was adopted)."""
    pids: list[int] = []
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as listing:
                pids += map(int, listing.read().split())
        return pids
    except OSError:  # no /proc, or a kernel without the children files: read every process
        pass
    me = os.getpid()
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with (
                    contextlib.suppress(OSError, ValueError, IndexError),
                    open(f"/proc/{entry}/stat") as stat,
                ):
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) == me:  # the field after the name
                        pids.append(int(entry))
    return pids


def kill_group(pid: int) -> None:
    """Kill a rank and everything in its process group."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
