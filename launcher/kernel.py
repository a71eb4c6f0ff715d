"""``python launcher/kernel.py [--fork-server] [--guarded=PACKAGE] [ipykernel's arguments]``: a
grading kernel (ipykernel's), which, with ``--fork-server``, forks the launcher's fork server
before the kernel starts. (Run as a script: importing the launcher package imports torch, which
a kernel whose notebook launches nothing need not pay for.)

A fork server started the usual way is a second interpreter importing torch: over a second of
CPU for every notebook graded that launches ranks. This process imports torch and what the
server needs once, forks the server, and then runs the kernel, which would import torch anyway.
At that fork only the main thread runs, the kernel has not started, no cell has run, and the
environment is the one grading gave the kernel. Where grading guards the kernel (``--guarded``),
the server serves only as the guard will fix it (`launcher.guard.install(PACKAGE)`: importing
modules of the course's and torch's packages alone); if the guard fixes it otherwise, the kernel
stops it and starts one as usual (`forkserver.get_server`). Grading starts its kernels so only
for notebooks whose own cells import the launcher: importing torch would cost the others more.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FORK_SERVER = "--fork-server"
GUARDED = "--guarded="


def main() -> None:
    ours = [arg for arg in sys.argv[1:] if arg == FORK_SERVER or arg.startswith(GUARDED)]
    if FORK_SERVER in ours:
        from launcher import guard

        packages = [arg.removeprefix(GUARDED) for arg in ours if arg.startswith(GUARDED)]
        start_server_ahead(guard.server_packages(*packages) if packages else ())
    sys.argv = [sys.argv[0], *(arg for arg in sys.argv[1:] if arg not in ours)]
    _interrupt_process_1_itself()
    from ipykernel import kernelapp

    kernelapp.launch_new_instance()


def _interrupt_process_1_itself() -> None:
    """Asked to interrupt, ipykernel signals its process group if it leads one: ``killpg``. In
    grading's sandbox the kernel is its namespace's process 1, and ``killpg(1)`` is ``kill(-1)``,
    which signals every other process there (as before) and never the kernel: a cell that hangs
    ran on past its time limit whenever another process ran (the fork server). So process 1
    signals the others so, and then itself."""
    from ipykernel import kernelbase

    send = kernelbase.Kernel._send_interrupt_children

    def send_interrupt(self: kernelbase.Kernel) -> None:
        if os.getpid() != 1:
            send(self)
            return
        with contextlib.suppress(OSError):  # (none other running)
            os.kill(-1, signal.SIGINT)
        os.kill(1, signal.SIGINT)

    kernelbase.Kernel._send_interrupt_children = send_interrupt


def start_server_ahead(allowed: tuple[str, ...]) -> None:
    """Fork the fork server from this process, to serve the ``allowed`` packages, and hand it to
    `forkserver` for the kernel's first launch."""
    import cloudpickle  # noqa: F401 - what the server imports first: once, for both processes
    import torch  # noqa: F401
    import torch.distributed  # noqa: F401

    from launcher import forkserver, rank  # noqa: F401

    ours, theirs = socket.socketpair()
    log = tempfile.TemporaryFile()  # noqa: SIM115 - kept open as long as the server runs
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()  # (as `start_new_session`: an interrupt meant for the kernel is not its)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            os.close(null)
            ours.close()
            forkserver.serve(theirs.detach(), [], ",".join(allowed))
        finally:
            os._exit(0)
    theirs.close()
    forkserver.hand_over(allowed, ours, Forked(pid), log)


class Forked:
    """A child process, seen as the fork server's handle sees a `subprocess.Popen`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                done, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped already
                done, status = self.pid, signal.SIGKILL
            if done:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"the fork server ({self.pid})", timeout)
            time.sleep(0.005)
        return self.returncode

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)


if __name__ == "__main__":
    # This file's folder leaves Python's path, where the launcher's modules would shadow others
    # (run as a script, the working folder is not on it: ipykernel's shell adds it back itself).
    if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        del sys.path[0]
    main()
