"""The watchdog that keeps a grading sandbox (grading/sandbox.py) within its caps.

A thread in the grading process finds the sandbox's pid namespace, then several times a second
counts its tasks (processes and threads) and its memory (the proportional set size of its
processes, plus what its /tmp and /dev/shm hold), and kills the whole sandbox when either
passes its cap, keeping the reason and the peaks. cgroups would be the kernel's own way to cap
memory, but an ordinary user can make them only where systemd delegates them; this works
anywhere. Only instructors run this: students' notebooks never import it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

GiB = 2**30
# How a sandbox's log line gives the CPU time of the processes its kill ended, which the grading
# process's own CPU time does not include (grading/grade_class.py adds it).
UNCOUNTED_CPU = "CPU time of the processes its end killed:"


def _children(pid: int) -> list[int]:
    children = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(f"/proc/{entry.name}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                children.append(int(entry.name))
    return children


def _tasks_and_memory(pid: int) -> tuple[int, int]:
    """A process's thread count and proportional set size in bytes (0, 0 if it is gone)."""
    try:
        threads = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[17])
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except (OSError, IndexError, ValueError):
        return 0, 0
    pss = next((line.split()[1] for line in rollup.splitlines() if line.startswith("Pss:")), "0")
    return threads, int(pss) * 1024


def _cpu_seconds(pid: int) -> float:
    """The CPU time a process used, with that of the children it has waited for (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime


def _used(folder: str) -> int:
    try:
        stats = os.statvfs(folder)
    except OSError:
        return 0
    return (stats.f_blocks - stats.f_bfree) * stats.f_frsize


class Watchdog(threading.Thread):
    """Stops a sandbox whose tasks or memory pass their caps, and keeps their peaks."""

    def __init__(
        self,
        bwrap: subprocess.Popen,
        max_tasks: int,
        max_memory: int,
        cgroup: Path | None,
        interval: float = 0.2,
    ):
        super().__init__(name=f"sandbox-watchdog-{bwrap.pid}", daemon=True)
        self.bwrap, self.max_tasks, self.max_memory = bwrap, max_tasks, max_memory
        self.cgroup = cgroup
        self.interval = interval
        self.init_pid: int | None = None  # the sandbox's pid 1 (the kernel), as the grader sees it
        self.namespace: str | None = None  # its pid namespace
        self.reason: str | None = None  # why it stopped the sandbox
        self.peak_tasks = self.peak_memory = 0
        # CPU seconds that the grader's own accounting misses: when the sandbox's pid 1 is killed,
        # Linux reaps the rest of its processes without adding their time to anyone's.
        self.uncounted_cpu_s = 0.0
        self._done = threading.Event()

    def run(self) -> None:
        namespace = self.namespace = self._namespace()
        while namespace is not None and not self._done.wait(self.interval):
            if self._refused_forks():  # checked first: a scan of /proc is slow during a fork bomb
                self.stop(f"it tried to run more than {self.max_tasks} processes and threads at once")
                return
            members = _members(namespace)
            if not members:
                return
            tasks = memory = 0
            for i, pid in enumerate(members):
                threads, pss = _tasks_and_memory(pid)
                tasks, memory = tasks + threads, memory + pss
                if tasks >= self.max_tasks or (i % 16 == 15 and self._refused_forks()):
                    break
            root = f"/proc/{self.init_pid}/root"
            memory += _used(f"{root}/tmp") + _used(f"{root}/dev/shm")
            self.peak_tasks, self.peak_memory = max(self.peak_tasks, tasks), max(self.peak_memory, memory)
            if tasks >= self.max_tasks or self._refused_forks():
                self.stop(f"it tried to run more than {self.max_tasks} processes and threads at once")
            elif memory > self.max_memory:
                self.stop(f"it used more than {self.max_memory / GiB:.3g} GiB of memory")

    def _refused_forks(self) -> bool:
        # The pids cgroup counts the forks it refused: one read, however many processes there are.
        try:
            events = (self.cgroup / "pids.events").read_text() if self.cgroup else "max 0"
        except OSError:
            return False
        return int(events.split()[1]) > 0

    def _namespace(self) -> str | None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not self._done.is_set():
            for child in _children(self.bwrap.pid):
                try:
                    namespace = os.readlink(f"/proc/{child}/ns/pid")
                except OSError:
                    continue
                if namespace != os.readlink("/proc/self/ns/pid"):
                    self.init_pid = child
                    return namespace
            time.sleep(0.02)
        return None

    def stop(self, reason: str | None = None, count_cpu: bool = False) -> None:
        """Kill everything in the sandbox (its pid 1 takes the rest with it) and stop watching;
        with ``count_cpu``, first note the CPU time of what the kill will end."""
        if reason and self.reason is None:
            self.reason = reason
        self._done.set()
        # Only while they are still the sandbox's: a pid is reused once its process is gone.
        if self.init_pid is not None and self.namespace and _in(str(self.init_pid), self.namespace):
            if count_cpu:
                others = [pid for pid in _members(self.namespace) if pid != self.init_pid]
                self.uncounted_cpu_s = sum(_cpu_seconds(pid) for pid in others)
            with contextlib.suppress(OSError):
                os.kill(self.init_pid, signal.SIGKILL)
            # bwrap then reaps the kernel and exits by itself, which adds the CPU time of
            # everything the sandbox ran to the grader's (killing bwrap first would lose it).
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.bwrap.wait(timeout=2)
        if self.bwrap.poll() is None:
            self.bwrap.kill()


def _members(namespace: str) -> list[int]:
    """The processes in a pid namespace, as the grader sees them."""
    return [int(e.name) for e in os.scandir("/proc") if e.name.isdigit() and _in(e.name, namespace)]


def _in(pid: str, namespace: str) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid") == namespace
    except OSError:
        return False
