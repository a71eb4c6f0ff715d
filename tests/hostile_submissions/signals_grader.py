"""Kills, or stops with SIGSTOP, the grading process, its process group and every process it
can signal: found as its parent, by name in /proc, and with kill(-1).

expect: full
"""

import os
import signal

for sig in (signal.SIGSTOP, signal.SIGKILL):
    targets = [os.getppid()]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"nbgrader" in f.read():
                    targets.append(int(pid))
        except OSError:
            pass
    for pid in targets:
        try:
            os.kill(pid, sig)
        except OSError:
            pass
    try:
        os.kill(-1, sig)
    except OSError:
        pass
