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

The server never unpickles anything of the caller's: it hands each child the launch's bytes
as they came, so no user module is ever imported into it. It runs in a session of its own (a
terminal's or Jupyter's interrupt reaches only the caller, which stops the ranks itself), and
exits when its socket to the caller closes, killing any rank still running, so nothing
outlives the process that started it.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import pickle
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

MESSAGE_HEADER = struct.Struct("!Q")
FDS_PER_RANK = 4  # stdout, stderr, result (rank -> caller), control (caller -> rank)
STARTUP_TIMEOUT_S = 120.0  # importing torch on a slow laptop's cold disk can take a while
REPLY_TIMEOUT_S = 30.0  # forking ranks takes milliseconds; no answer in this long means trouble
EXIT_INTERNAL = 70  # a rank's bootstrap broke (a bug in the launcher)


class ForkServerError(RuntimeError):
    """The fork server could not start or stopped answering; the next launch starts a new one."""


# -- framing, shared by the caller, the server and the ranks -----------------------------------


def frame(obj: Any) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return MESSAGE_HEADER.pack(len(data)) + data


def read_exact(fd: int, size: int) -> bytes | None:
    """Read exactly ``size`` bytes from a blocking file descriptor; None at end of file."""
    chunks, remaining = [], size
    while remaining:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> Any | None:
    """Read one framed pickle from a blocking socket or pipe; None at end of file."""
    header = read_exact(fd, MESSAGE_HEADER.size)
    if header is None:
        return None
    data = read_exact(fd, MESSAGE_HEADER.unpack(header)[0])
    return None if data is None else pickle.loads(data)


def wait_readable(fd: int, timeout: float | None) -> bool:
    """True once ``fd`` has something to read (or reached end of file), False on timeout."""
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        return bool(selector.select(timeout))


# -- the launching process's side -------------------------------------------------------------


class ForkServer:
    """Handle on a running fork server, used by `launch`."""

    def __init__(self, preload: list[str]) -> None:
        ours, theirs = socket.socketpair()
        package_parent = str(Path(__file__).resolve().parent.parent)
        # Ignoring interrupts comes first: importing torch takes seconds, and an interrupt in
        # that time must not kill the server half-started.
        boot = (
            "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); "
            "import sys; sys.path.insert(0, sys.argv[2]); "
            "from launcher.forkserver import serve; serve(int(sys.argv[1]), sys.argv[3:])"
        )
        env = dict(os.environ)
        if sys.platform == "darwin":
            # Forking after importing torch can trip the Objective-C runtime's fork check.
            env.setdefault("OBJC_DISABLE_INITIALIZE_FORK_SAFETY", "YES")
        # What the server writes itself (an import error, say) goes to this file, to be shown
        # if it fails to start. The ranks get their own stdout and stderr.
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - kept open as long as the server runs
        self.process = subprocess.Popen(
            [sys.executable, "-c", boot, str(theirs.fileno()), package_parent, *preload],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=self.log,
            env=env,
            start_new_session=True,
        )
        theirs.close()
        self.sock = ours
        self.pending: list[tuple] = []  # notices that arrived while waiting for a reply
        try:
            self._await_ready()
        except BaseException:
            self.close()
            raise

    def _await_ready(self) -> None:
        if not wait_readable(self.fileno(), STARTUP_TIMEOUT_S):
            raise ForkServerError(
                f"the launcher's fork server did not start within {STARTUP_TIMEOUT_S:.0f} s"
            )
        message = read_frame(self.fileno())
        if message is None or message[0] != "ready":
            self.log.seek(0)
            output = self.log.read().decode(errors="replace").strip()
            detail = message[1] if message else f"it exited with code {self.process.wait()}:\n{output}"
            raise ForkServerError(f"the launcher's fork server did not start; {detail}")

    def fileno(self) -> int:
        return self.sock.fileno()

    def alive(self) -> bool:
        return self.process.poll() is None

    def start_ranks(self, launch_id: int, spec: bytes, rank_fds: list[tuple[int, ...]]) -> list[int]:
        """Fork one process per entry of ``rank_fds``; return their pids (index = rank)."""
        self.sock.sendall(frame(("start", launch_id, spec, len(rank_fds))))
        for fds in rank_fds:  # one message per rank: a message may carry only so many fds
            socket.send_fds(self.sock, [b"F"], list(fds))
        return self._reply("started")[2]

    def preload(self, modules: list[str]) -> None:
        """Have the server import these modules before it forks the next ranks."""
        self.sock.sendall(frame(("preload", modules)))

    def kill(self, launch_id: int) -> None:
        """SIGKILL every process of this launch that has not exited yet."""
        self.sock.sendall(frame(("kill", launch_id)))

    def read_notice(self) -> tuple | None:
        """The next notice (``("exited", launch_id, rank, returncode)``); None if the server died."""
        if self.pending:
            return self.pending.pop(0)
        return read_frame(self.fileno())

    def _reply(self, kind: str) -> tuple:
        while True:
            if not wait_readable(self.fileno(), REPLY_TIMEOUT_S):
                raise ForkServerError(
                    f"the launcher's fork server did not answer within {REPLY_TIMEOUT_S:.0f} s"
                )
            message = read_frame(self.fileno())
            if message is None:
                raise ForkServerError(
                    f"the launcher's fork server stopped unexpectedly (exit code {self.process.wait()})"
                )
            if message[0] == kind:
                return message
            self.pending.append(message)

    def close(self) -> None:
        """Stop the server (it kills its children first) and reap it."""
        self.sock.close()
        self.log.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_server: ForkServer | None = None
_server_lock = threading.Lock()
_preloaded: list[str] = []


def get_server() -> ForkServer:
    """The running fork server, started on first use (or again if it died or was retired)."""
    global _server
    with _server_lock:
        if _server is not None and not _server.alive():
            _server.close()
            _server = None
        if _server is None:
            _server = ForkServer(_preloaded)
        return _server


def retire(server: ForkServer) -> None:
    """Stop using a server whose conversation went wrong; the next launch starts a new one."""
    global _server
    with _server_lock:
        if _server is server:
            _server = None
    server.close()


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
    except BaseException:  # noqa: BLE001 - tell the caller why, then give up
        import traceback

        sock.sendall(frame(("failed", traceback.format_exc())))
        return
    _import_quietly(preload)

    wakeup_r, wakeup_w = os.pipe()
    os.set_blocking(wakeup_w, False)
    signal.set_wakeup_fd(wakeup_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, tuple[int, int]] = {}  # pid -> (launch_id, rank)
    sock.sendall(frame(("ready", os.getpid())))
    try:
        while True:
            readable = _wait(sock, wakeup_r)
            if wakeup_r in readable:
                os.read(wakeup_r, 4096)
            _reap(children, sock)
            if sock not in readable:
                continue
            message = read_frame(fd)
            if message is None:
                break
            if message[0] == "start":
                _, launch_id, spec, nranks = message
                fds = [socket.recv_fds(sock, 1, FDS_PER_RANK)[1] for _ in range(nranks)]
                inherited = [sock.fileno(), wakeup_r, wakeup_w, *(f for group in fds for f in group)]
                pids = []
                for rank, rank_fds in enumerate(fds):
                    pid = _fork_rank(rank_module, spec, rank, rank_fds, inherited)
                    children[pid] = (launch_id, rank)
                    pids.append(pid)
                for f in inherited[3:]:
                    os.close(f)
                sock.sendall(frame(("started", launch_id, pids)))
            elif message[0] == "preload":
                _import_quietly(message[1])
            elif message[0] == "kill":
                for pid, (launch_id, _) in children.items():
                    if launch_id == message[1]:
                        _kill(pid)
    finally:
        for pid in children:
            _kill(pid)
        while children:
            pid, _ = os.waitpid(-1, 0)
            children.pop(pid, None)


def _wait(sock: socket.socket, wakeup_r: int) -> list:
    with selectors.DefaultSelector() as selector:
        selector.register(sock, selectors.EVENT_READ)
        selector.register(wakeup_r, selectors.EVENT_READ)
        return [key.fileobj for key, _ in selector.select()]


def _import_quietly(modules: list[str]) -> None:
    """Import what was asked for; a module that fails here fails, visibly, in the ranks instead."""
    for module in modules:
        with contextlib.suppress(Exception):
            importlib.import_module(module)
    # Objects created so far are never freed; keeping the collector off them saves every
    # child from touching (and so copying) their memory pages.
    gc.freeze()


def _fork_rank(rank_module: Any, spec: bytes, rank: int, fds: list[int], inherited: list[int]) -> int:
    server = os.getpid()
    pid = os.fork()
    if pid:
        with contextlib.suppress(OSError):  # (the child does it too: whoever runs first)
            os.setpgid(pid, pid)
        return pid
    try:
        # A process group of its own, so that stopping the rank stops what it started too.
        os.setpgid(0, 0)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in inherited:
            if fd not in fds:
                os.close(fd)
        rank_module.run_rank(spec, rank, server, *fds)
    finally:
        os._exit(EXIT_INTERNAL)


def _reap(children: dict[int, tuple[int, int]], sock: socket.socket) -> None:
    while children:
        try:  # look without reaping: while the rank is a zombie, its pid (and group) stay its own
            exited = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if exited is None:
            return
        _kill(exited.si_pid)  # anything the rank started, left in its process group, goes with it
        pid, status = os.waitpid(exited.si_pid, 0)
        launch_id, rank = children.pop(pid, (None, None))
        if launch_id is not None:
            sock.sendall(frame(("exited", launch_id, rank, os.waitstatus_to_exitcode(status))))


def _kill(pid: int) -> None:
    """Kill a rank and everything in its process group."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
