"""A fork server: one idle Python process with torch imported, which forks rank processes on request.

Starting a Python process and importing torch takes seconds; forking a process that has
already done so takes milliseconds. So the first `launch` in a process starts this server (a
fresh interpreter, never a fork of the caller, and it never touches CUDA), and every launch
asks it to fork one child per rank. Forking a process that has not touched CUDA is safe;
each rank initialises CUDA itself if it uses NCCL.

Why not the standard library's "forkserver" start method: every child re-imports the caller's
``__main__`` (in Jupyter that is ipykernel, hundreds of milliseconds per rank), there is one
server per interpreter whose preload list cannot change once started, and it has no way to
hand a child its output pipes. Why not ``torch.multiprocessing.spawn``: it starts fresh
interpreters every time, which is what makes it take seconds.

The server exits when its socket to the launching process closes, killing any rank still
running, so nothing outlives the process that started it.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import pickle
import select
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from .rank import EXIT_INTERNAL, MESSAGE_HEADER

STARTUP_TIMEOUT_S = 120.0  # importing torch on a slow laptop's cold disk can take a while


class ForkServerError(RuntimeError):
    """The fork server could not start or stopped unexpectedly."""


# -- framing, shared by both sides ------------------------------------------------------------


def send_frame(sock: socket.socket, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(MESSAGE_HEADER.pack(len(data)) + data)


def read_exact(fd: int, size: int) -> bytes | None:
    """Read exactly ``size`` bytes from a file descriptor; None at end of file."""
    chunks, remaining = [], size
    while remaining:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> Any | None:
    """Read one framed pickle from a socket or pipe; None at end of file."""
    header = read_exact(fd, MESSAGE_HEADER.size)
    if header is None:
        return None
    data = read_exact(fd, MESSAGE_HEADER.unpack(header)[0])
    return None if data is None else pickle.loads(data)


# -- the launching process's side -------------------------------------------------------------


class ForkServer:
    """Handle on a running fork server, used by `launch`."""

    def __init__(self, preload: list[str]) -> None:
        ours, theirs = socket.socketpair()
        package_parent = str(Path(__file__).resolve().parent.parent)
        boot = (
            "import sys; sys.path.insert(0, sys.argv[2]); "
            "from launcher.forkserver import serve; serve(int(sys.argv[1]), sys.argv[3:])"
        )
        # The server's environment is the caller's at this moment; each launch sends the
        # caller's current environment, working directory and sys.path to its ranks anyway.
        self.process = subprocess.Popen(
            [sys.executable, "-c", boot, str(theirs.fileno()), package_parent, *preload],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
        )
        theirs.close()
        self.sock = ours
        self.pending: list[tuple] = []  # notices that arrived while waiting for a reply
        self._await_ready()

    def _await_ready(self) -> None:
        ready, _, _ = select.select([self.sock], [], [], STARTUP_TIMEOUT_S)
        message = read_frame(self.sock.fileno()) if ready else None
        if message is None or message[0] != "ready":
            self.close()
            detail = message[1] if message else f"no answer within {STARTUP_TIMEOUT_S:.0f} s"
            raise ForkServerError(f"the launcher's fork server did not start:\n{detail}")

    def fileno(self) -> int:
        return self.sock.fileno()

    def alive(self) -> bool:
        return self.process.poll() is None

    def start_ranks(self, launch_id: int, spec: bytes, rank_fds: list[tuple[int, ...]]) -> list[int]:
        """Fork one process per entry of ``rank_fds``; return their pids (index = rank)."""
        send_frame(self.sock, ("start", launch_id, spec, len(rank_fds)))
        fds = [fd for group in rank_fds for fd in group]
        socket.send_fds(self.sock, [b"F"], fds)
        reply = self._reply("started")
        return reply[2]

    def preload(self, modules: list[str]) -> None:
        """Have the server import these modules before it forks the next ranks."""
        send_frame(self.sock, ("preload", modules))

    def kill(self, launch_id: int) -> None:
        """SIGKILL every process of this launch that has not exited yet."""
        send_frame(self.sock, ("kill", launch_id))

    def read_notice(self) -> tuple | None:
        """The next notice (``("exited", launch_id, rank, returncode)``); None if the server died."""
        if self.pending:
            return self.pending.pop(0)
        return read_frame(self.sock.fileno())

    def _reply(self, kind: str) -> tuple:
        while True:
            message = read_frame(self.sock.fileno())
            if message is None:
                raise ForkServerError(
                    f"the launcher's fork server stopped unexpectedly (exit code {self.process.wait()})"
                )
            if message[0] == kind:
                return message
            self.pending.append(message)

    def close(self) -> None:
        """Stop the server (it kills its children first) and reap it."""
        try:
            self.sock.close()
        finally:
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


_server: ForkServer | None = None
_server_lock = threading.Lock()
_preloaded: list[str] = []


def get_server() -> ForkServer:
    """The running fork server, started on first use (or again if it died)."""
    global _server
    with _server_lock:
        if _server is None or not _server.alive():
            _server = ForkServer(_preloaded)
        return _server


def preload(*modules: str) -> None:
    """Import these modules in the fork server, so that every rank starts with them imported.

    A module that takes long to import (``torch.distributed.tensor``, say) otherwise costs that
    time in every rank of every launch. Only preload modules that neither initialise CUDA nor
    start threads when imported: the server forks every rank. Inside a rank this does nothing.
    """
    from .rank import current_context

    if current_context() is not None:
        return
    new = [m for m in modules if m not in _preloaded]
    for module in new:
        if not isinstance(module, str) or not module:
            raise TypeError(f"preload takes module names, such as 'torch.distributed.tensor'; got {module!r}")
    _preloaded.extend(new)
    with _server_lock:
        if new and _server is not None and _server.alive():
            _server.preload(new)


def shutdown() -> None:
    """Stop the fork server, if one is running. The next `launch` starts a new one."""
    global _server
    with _server_lock:
        if _server is not None:
            _server.close()
            _server = None


# -- the server's side ------------------------------------------------------------------------


def serve(fd: int, preload: list[str]) -> None:
    """Main loop of the fork server process."""
    sock = socket.socket(fileno=fd)
    try:
        import cloudpickle  # noqa: F401 - preloaded so that every rank has it already
        import torch  # noqa: F401
        import torch.distributed  # noqa: F401

        from . import rank as rank_module
    except BaseException:  # noqa: BLE001
        import traceback

        send_frame(sock, ("failed", traceback.format_exc()))
        return
    _import_quietly(preload)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the launching process handles interrupts

    wakeup_r, wakeup_w = os.pipe()
    os.set_blocking(wakeup_w, False)
    signal.set_wakeup_fd(wakeup_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, tuple[int, int]] = {}  # pid -> (launch_id, rank)
    send_frame(sock, ("ready", os.getpid()))

    while True:
        readable, _, _ = select.select([sock, wakeup_r], [], [])
        if wakeup_r in readable:
            os.read(wakeup_r, 4096)
        _reap(children, sock)
        if sock not in readable:
            continue
        message = read_frame(fd)
        if message is None or message[0] == "stop":
            break
        if message[0] == "start":
            _, launch_id, spec_bytes, nranks = message
            _, fds, _, _ = socket.recv_fds(sock, 1, 4 * nranks)
            spec = pickle.loads(spec_bytes)
            own_fds = [sock.fileno(), wakeup_r, wakeup_w, *fds]
            pids = []
            for rank in range(nranks):
                pid = _fork_rank(rank_module, spec, rank, fds[4 * rank : 4 * rank + 4], own_fds)
                children[pid] = (launch_id, rank)
                pids.append(pid)
            for fd_ in fds:
                os.close(fd_)
            send_frame(sock, ("started", launch_id, pids))
        elif message[0] == "preload":
            _import_quietly(message[1])
        elif message[0] == "kill":
            for pid, (launch_id, _) in children.items():
                if launch_id == message[1]:
                    _kill(pid)

    for pid in children:
        _kill(pid)
    while children:
        pid, status = os.waitpid(-1, 0)
        children.pop(pid, None)


def _import_quietly(modules: list[str]) -> None:
    """Import what was asked for; a module that fails here fails, visibly, in the ranks instead."""
    for module in modules:
        with contextlib.suppress(Exception):
            importlib.import_module(module)
    # Objects created so far are never freed; keeping the collector off them saves every
    # child from touching (and so copying) their memory pages.
    gc.freeze()


def _fork_rank(rank_module: Any, spec: Any, rank: int, fds: list[int], inherited: list[int]) -> int:
    pid = os.fork()
    if pid:
        return pid
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in inherited:
            if fd not in fds:
                os.close(fd)
        rank_module.run_rank(spec, rank, *fds)
    finally:
        os._exit(EXIT_INTERNAL)


def _reap(children: dict[int, tuple[int, int]], sock: socket.socket) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        launch_id, rank = children.pop(pid, (None, None))
        if launch_id is not None:
            send_frame(sock, ("exited", launch_id, rank, os.waitstatus_to_exitcode(status)))


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
