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

Nothing a rank starts outlives the launch either. Each rank has a process group of its own,
killed when the rank ends. A program that leaves that group (``start_new_session=True``, a
daemon) is orphaned when the rank ends; on Linux the server is a *subreaper*, so such orphans
become its children rather than init's, and once every rank of a launch has ended the server
kills whatever children it has that are not ranks, before it tells the caller so.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from .orphans import become_subreaper, kill_group, kill_orphans
from .wire import EXIT_INTERNAL, Frames, frame, read_available, read_frame, wait_readable

FDS_PER_RANK = 4  # stdout, stderr, result (rank -> caller), control (caller -> rank)
STARTUP_TIMEOUT_S = 120.0  # importing torch on a slow laptop's cold disk can take a while
REPLY_TIMEOUT_S = 120.0  # forking takes milliseconds, but the server may be importing a preload


class ForkServerError(RuntimeError):
    """The fork server could not start or stopped answering; the next launch starts a new one."""


# -- the launching process's side -------------------------------------------------------------


class ForkServer:
    """Handle on a running fork server, used by `launch`.

    Its socket is read without blocking and its messages assembled whole, so an interrupt can
    never leave a message half read. An interrupt while a message is half sent cannot be undone:
    the server is then marked broken, and the next launch starts a new one.
    """

    def __init__(self, preload: list[str], ahead: tuple | None = None) -> None:
        # A server forked ahead (launcher/kernel.py) is handed over as it is, and sent its preloads.
        self.sock, self.process, self.log = self._start(preload) if ahead is None else ahead
        self.sock.setblocking(False)
        self.frames = Frames()
        self.pending: list[tuple] = []  # messages received but not yet asked for
        self.broken = False
        try:
            ready = self._reply(("ready", "failed"), STARTUP_TIMEOUT_S, "start")
        except BaseException:
            self.close(wait=0)  # it has no ranks yet: no need to wait for it
            raise
        if ready[0] == "failed":
            self.close(wait=0)
            raise ForkServerError(f"the launcher's fork server did not start:\n{ready[1]}")
        if ahead is not None and preload:
            self.preload(preload)

    @staticmethod
    def _start(preload: list[str]) -> tuple[socket.socket, Any, Any]:
        """A new server process: its socket, its `Popen`, and the file its own output goes to."""
        ours, theirs = socket.socketpair()
        package_parent = str(Path(__file__).resolve().parent.parent)
        # Ignoring interrupts comes first: importing torch takes seconds, and an interrupt in
        # that time must not kill the server half-started.
        boot = (
            "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); "
            "import sys; sys.path.insert(0, sys.argv[2]); "
            "from launcher.forkserver import serve; serve(int(sys.argv[1]), sys.argv[4:], sys.argv[3])"
        )
        env = dict(_FIXED[0]) if _FIXED else dict(os.environ)
        allowed = ",".join(_FIXED[1]) if _FIXED else ""
        if sys.platform == "darwin":
            # Forking after importing torch can trip the Objective-C runtime's fork check.
            env.setdefault("OBJC_DISABLE_INITIALIZE_FORK_SAFETY", "YES")
        # What the server writes itself (an import error, say) goes to this file, to be shown
        # if it fails. The ranks get their own stdout and stderr.
        log = tempfile.TemporaryFile()  # noqa: SIM115 - kept open as long as the server runs
        process = subprocess.Popen(
            [sys.executable, "-c", boot, str(theirs.fileno()), package_parent, allowed, *preload],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=env,
            start_new_session=True,
        )
        theirs.close()
        return ours, process, log

    def fileno(self) -> int:
        return self.sock.fileno()

    def alive(self) -> bool:
        return not self.broken and self.process.poll() is None

    def start_ranks(self, launch_id: int, spec: bytes, rank_fds: list[tuple[int, ...]]) -> list[int]:
        """Fork one process per entry of ``rank_fds``; return their pids (index = rank)."""
        self._send(frame(("start", launch_id, spec, len(rank_fds))), [list(fds) for fds in rank_fds])
        reply = self._reply(("started", "failed"), REPLY_TIMEOUT_S, "fork the ranks")
        if reply[0] == "failed":
            self.broken = True
            raise ForkServerError(f"the launcher's fork server could not start the ranks: {reply[2]}")
        return reply[2]

    def preload(self, modules: list[str]) -> None:
        """Have the server import these modules before it forks the next ranks."""
        self._send(frame(("preload", modules)))

    def kill(self, launch_id: int) -> None:
        """SIGKILL every process of this launch that has not exited yet."""
        self._send(frame(("kill", launch_id)))

    def notices(self) -> list[tuple]:
        """The messages that have arrived (call when the socket is readable)."""
        self._receive()
        notices, self.pending = self.pending, []
        return notices

    def _send(self, data: bytes, fd_groups: list[list[int]] = ()) -> None:
        try:
            self.sock.setblocking(True)
            self.sock.sendall(data)
            for fds in fd_groups:  # one message per rank: a message may carry only so many fds
                socket.send_fds(self.sock, [b"F"], fds)
        except BaseException:
            self.broken = True  # the server may hold half a message: never talk to it again
            raise
        finally:
            self.sock.setblocking(False)

    def _receive(self) -> None:
        data = read_available(self.fileno())
        if data == b"":
            self.broken = True
            self.log.seek(0)
            output = self.log.read().decode(errors="replace").strip()
            raise ForkServerError(
                f"the launcher's fork server stopped unexpectedly (exit code {self.process.wait()})"
                + (f":\n{output}" if output else "")
            )
        if data:
            self.pending += self.frames.feed(data)

    def _reply(self, kinds: tuple[str, ...], timeout: float, doing: str) -> tuple:
        deadline = time.monotonic() + timeout
        while True:
            for i, message in enumerate(self.pending):
                if message[0] in kinds:
                    return self.pending.pop(i)
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not wait_readable(self.fileno(), remaining):
                self.broken = True
                raise ForkServerError(f"the launcher's fork server did not {doing} within {timeout:.0f} s")
            self._receive()

    def close(self, wait: float = 5.0) -> None:
        """Stop the server and reap it. Closing its socket makes it kill its ranks and exit;
        if it has not within ``wait`` seconds, it is killed."""
        self.broken = True
        _stop(self.sock, self.process, self.log, wait)


def _stop(sock: socket.socket, process: Any, log: Any, wait: float) -> None:
    sock.close()
    log.close()
    try:
        process.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


_server: ForkServer | None = None
_server_lock = threading.Lock()
_preloaded: list[str] = []
_shut_down = False  # when grading: `shutdown` was called, and no server may start again
# When grading: the environment every fork server starts with, and the packages whose modules it
# may import (see `fix`). A tuple, so that it cannot be changed in place.
_FIXED: tuple[tuple[tuple[str, str], ...], tuple[str, ...]] | None = None


def fix(allowed: tuple[str, ...]) -> None:
    """Fix the fork server for grading, before any submission's code runs: it starts from the
    environment this process has now, imports only modules of the ``allowed`` packages (a
    submission's module, preloaded, would run before each rank's guard takes its baseline),
    and once `shutdown` has stopped it, never starts again (a server the launcher itself
    retires, after an interrupt cut a message in half, is started again from that same
    environment)."""
    global _FIXED
    if _FIXED is None:
        _FIXED = (tuple(os.environ.items()), tuple(allowed))


def get_server() -> ForkServer:
    """The running fork server, started on first use (or again if it died or was retired, except
    when grading: see `fix`)."""
    global _server
    with _server_lock:
        if _server is not None and not _server.alive():
            _server.close(wait=2)  # broken or dead: it may still hold ranks that must go
            _server = None
        if _server is None:
            if _FIXED and _shut_down:
                raise ForkServerError(
                    "the launcher's fork server was shut down, and grading starts it only once (so that "
                    "no submission can start it again as it likes): the launches after this one fail."
                )
            _server = ForkServer(_preloaded, _take_ahead())
        return _server


# -- a server forked ahead, by a grading kernel before it starts (launcher/kernel.py) ----------

# The packages it serves (`fix`), and its socket, process and output file; until it is taken.
_ahead: tuple[tuple[str, ...], tuple] | None = None


def hand_over(allowed: tuple[str, ...], sock: socket.socket, process: Any, log: Any) -> None:
    """Take a server forked ahead (launcher/kernel.py) to serve with ``allowed``: ``process`` has
    `subprocess.Popen`'s ``poll``, ``wait`` and ``kill``, ``log`` is the file its output goes to."""
    global _ahead
    _ahead = (tuple(allowed), (sock, process, log))


def _take_ahead() -> tuple | None:
    """The server forked ahead, if there is one and it serves as `fix` asked; else None."""
    global _ahead
    if _ahead is None:
        return None
    (allowed, server), _ahead = _ahead, None
    if allowed == (_FIXED[1] if _FIXED else ()):
        return server
    _stop(*server, wait=2)
    return None


def retire(server: ForkServer) -> None:
    """Stop a server whose conversation went wrong, and its ranks; the next launch starts anew."""
    global _server
    with _server_lock:
        if _server is server:
            _server = None
    server.close(wait=2)


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
    """Stop the fork server, if one is running. The next `launch` starts a new one (except when
    grading: see `fix`)."""
    global _server, _shut_down, _ahead
    with _server_lock:
        _shut_down = _FIXED is not None
        if _ahead is not None:  # forked ahead, never taken
            _stop(*_ahead[1], wait=2)
            _ahead = None
        if _server is not None:
            _server.close()
            _server = None


# -- the server's side ------------------------------------------------------------------------


def serve(fd: int, preload: list[str], allowed: str = "") -> None:
    """Main loop of the fork server process; with ``allowed`` (packages, comma-separated), it
    imports only their modules."""
    global _ALLOWED
    _ALLOWED = tuple(filter(None, allowed.split(",")))
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
    _note_for_ranks()
    _raise_file_limit()
    become_subreaper()

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
                fds = _receive_rank_fds(sock, nranks)
                if fds is None:
                    sock.sendall(frame(("failed", launch_id, "it could not receive the ranks' pipes")))
                    continue
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
                _note_for_ranks()
            elif message[0] == "kill":
                for pid, (launch_id, _) in children.items():
                    if launch_id == message[1]:
                        kill_group(pid)
    finally:
        for pid in children:
            kill_group(pid)
        while children:
            pid, _ = os.waitpid(-1, 0)
            children.pop(pid, None)
        kill_orphans(children)


def _wait(sock: socket.socket, wakeup_r: int) -> list:
    with selectors.DefaultSelector() as selector:
        selector.register(sock, selectors.EVENT_READ)
        selector.register(wakeup_r, selectors.EVENT_READ)
        return [key.fileobj for key, _ in selector.select()]


_ALLOWED: tuple[str, ...] = ()  # in the server: the packages it may import from, if limited


def _note_for_ranks() -> None:
    """When grading, note what the ranks' guard compares with here, once, rather than in every
    rank: a rank is forked from this process before any submission's code runs in it."""
    if _ALLOWED:
        from . import guard

        guard.note_for_ranks(tuple(p for p in _ALLOWED if p not in ("torch", "numpy")))


def _import_quietly(modules: list[str]) -> None:
    """Import what was asked for; a module that fails here fails, visibly, in the ranks instead."""
    for module in modules:
        if _ALLOWED and module.split(".")[0] not in _ALLOWED:
            continue  # (when grading: a module of the submission's own is imported in its rank)
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
    for pid in list(children):
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # already gone: report it as killed
            done, status = pid, signal.SIGKILL
        if not done:
            continue
        # Anything the rank started, left in its process group, goes with it. (A group outlives
        # its leader while it has members, so its number cannot have been given to another.)
        kill_group(pid)
        launch_id, rank = children.pop(pid)
        if not children:  # every rank has ended: so must anything they started
            kill_orphans(children)
        sock.sendall(frame(("exited", launch_id, rank, os.waitstatus_to_exitcode(status))))


def _receive_rank_fds(sock: socket.socket, nranks: int) -> list[list[int]] | None:
    """Each rank's four pipes, one message per rank; None (all closed) if any did not arrive."""
    received: list[list[int]] = []
    for _ in range(nranks):
        try:
            data, fds, _, _ = socket.recv_fds(sock, 1, FDS_PER_RANK)
        except OSError:
            data, fds = b"", []
        received.append(fds)
        if not data or len(fds) != FDS_PER_RANK:  # too many open files drops them silently
            for fd in (f for group in received for f in group):
                os.close(fd)
            return None
    return received


def _raise_file_limit() -> None:
    """Ranks inherit this process's limit on open files: make it as high as allowed."""
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
