"""The launching process's side of `launch`: check the call, start the ranks, relay their output,
collect their results or errors. What runs inside a rank is in `launcher.rank`."""

from __future__ import annotations

import atexit
import contextlib
import inspect
import itertools
import operator
import os
import pickle
import selectors
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import types
import warnings
from collections.abc import Callable
from typing import Any

import cloudpickle

from .errors import (
    LaunchError,
    LaunchHang,
    RankException,
    RankFailure,
    RankStack,
    failure_report,
    format_traceback,
    hang_report,
    never_finishing,
    secondary_failures,
)
from .forkserver import ForkServerError, Frames, get_server, read_available, retire, wait_readable
from .rank import EXIT_ORPHANED, RETURNED, RUNNING, LaunchSpec, current_context

DEFAULT_TIMEOUT_S = 30.0
MAX_LOCAL_WORLD_SIZE = 64
FAILURE_GRACE_S = 0.3  # after a rank fails, how long the others get to report their own errors
FIRST_LOOK_S = 0.5  # first look at where the ranks are; then at doubling intervals
AFTER_RETURN_LOOK_S = 0.2  # look this soon after a rank returns while others have not
CONFIRM_LOOK_S = 0.5  # a deadlock seen in one look is confirmed by another this much later
ANSWER_WAIT_S = 1.0  # how long the ranks get to answer a look
RELEASE_WAIT_S = 10.0  # once every rank returned, how long they get to exit
STOP_WAIT_S = 2.0  # how long stopped ranks get to exit (five times that under NCCL)
MAX_TIMEOUT_S = 86_400.0
OUTPUT_DRAIN_S = 0.5  # after every rank exited, how long to wait for output still in flight
BACKENDS = ("auto", "gloo", "nccl")

_launch_lock = threading.Lock()
_launch_ids = itertools.count(1)


def launch(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    backend: str = "auto",
    timeout: float = DEFAULT_TIMEOUT_S,
    check_collectives: bool = True,
    **kwargs: Any,
) -> list[Any]:
    """Run ``fn(rank, world_size, *args, **kwargs)`` on ``world_size`` ranks; return their results.

    Each rank is its own process, inside an initialised default process group
    (``torch.distributed`` works as usual); the group is gone when ``launch`` returns.

    Args:
        fn: the function every rank runs. It may be defined in a notebook cell, a closure or a
            lambda; it is pickled (with cloudpickle) and so is everything it uses.
        world_size: the number of ranks, 1 or more.
        *args, **kwargs: passed on to ``fn`` after ``rank`` and ``world_size``.
        backend: ``"nccl"`` (one GPU per rank, rank r on ``cuda:r``), ``"gloo"`` (CPU), or
            ``"auto"``: NCCL when there are at least ``world_size`` GPUs, else Gloo.
            ``get_device()`` tells a rank which device to use.
        timeout: seconds the ranks may run. After that, ``launch`` raises `LaunchHang`
            showing where each rank is stuck. A deadlock it can prove (say, a recv from a
            rank that already returned) is reported within about a second instead.
        check_collectives: have torch check, before every collective, that all ranks call the
            same one with the same shapes (``TORCH_DISTRIBUTED_DEBUG=DETAIL``), so a mismatch
            is reported at once instead of hanging or corrupting data. It costs an extra small
            exchange per collective: turn it off when timing collectives.

    Returns:
        A list with one entry per rank: what ``fn`` returned there. Tensors come back on the
        CPU, detached. Under ``torchrun``, ``fn`` runs once, on this process's rank in the
        existing group, and ``launch`` returns this rank's result alone.

    Raises:
        LaunchError: a rank raised or died. The message names every failed rank and shows its
            traceback; ``err.failures[i].exception`` is the rank's original exception.
        LaunchHang: the ranks are deadlocked, or did not finish within ``timeout`` seconds;
            the message shows where each rank is stuck.
        KeyboardInterrupt: the kernel was interrupted; every rank has been stopped.
    """
    __tracebackhide__ = True
    if current_context() is not None:
        raise RuntimeError(
            "launch was called from inside a rank. Each rank already runs your function; call "
            "the code you want directly instead of launching again."
        )
    if _under_torchrun():
        return _run_in_torchrun_rank(fn, world_size, args, kwargs, backend)
    _check_arguments(fn, world_size, args, kwargs, backend, timeout)
    world_size = operator.index(world_size)
    if not hasattr(os, "fork"):
        raise RuntimeError(
            "launch starts ranks by forking, which Windows does not have. Use WSL2, or a "
            "Colab or Kaggle notebook, or run under torchrun."
        )
    spec = LaunchSpec(
        world_size=world_size,
        backend=resolve_backend(backend, world_size),
        store_path="",
        # Torch's own collective timeout stays longer than ours, so that at our deadline the
        # ranks are still where they got stuck and can say so.
        collective_timeout_s=float(timeout) + 30.0,
        check_collectives=bool(check_collectives),
        payload=pickle_function(fn, args, kwargs),
        cwd=os.getcwd(),
        sys_path=list(sys.path),
        env=_rank_environment(),
        num_threads=max(1, _usable_cpus() // world_size),
        warning_filters=_pickled_warning_filters(),
    )
    _make_room_for_pipes(world_size)
    with _launch_lock:
        outcome = _Launch(spec, float(timeout)).run()
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


# -- arguments --------------------------------------------------------------------------------


def _check_arguments(fn: Any, world_size: Any, args: tuple, kwargs: dict, backend: Any, timeout: Any) -> None:
    __tracebackhide__ = True
    if not callable(fn):
        raise TypeError(
            "launch's first argument must be the function each rank runs, called as "
            f"fn(rank, world_size, ...); got {_describe(fn)}."
        )
    if isinstance(world_size, bool):
        raise TypeError(f"world_size must be a whole number of ranks, such as 4; got {world_size!r}.")
    try:
        size = operator.index(world_size)
    except TypeError:
        raise TypeError(
            f"world_size must be a whole number of ranks, such as 4; got {_describe(world_size)}."
        ) from None
    if size < 1:
        raise ValueError(f"world_size must be at least 1 (one process per rank); got {size}.")
    if size > MAX_LOCAL_WORLD_SIZE:
        raise ValueError(
            f"world_size={size} would start {size} processes on this machine's "
            f"{os.cpu_count()} CPU cores; launch allows at most {MAX_LOCAL_WORLD_SIZE}. "
            "For more ranks, run your script on several machines under torchrun."
        )
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}; got {backend!r}.")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= MAX_TIMEOUT_S:
        raise ValueError(f"timeout must be a positive number of seconds, at most a day; got {timeout!r}.")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # some builtins have no signature; let the ranks find out
    try:
        signature.bind(0, size, *args, **kwargs)
    except TypeError as exc:
        name = getattr(fn, "__name__", "fn")
        extra = "".join(f", {a!r}" for a in args) + "".join(f", {k}={v!r}" for k, v in kwargs.items())
        raise TypeError(
            f"launch calls {name}(rank, world_size{extra}) on every rank, but {name} cannot be "
            f"called that way: {exc}. Its first two parameters receive the rank and the world size."
        ) from None


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:60] + "..."
    return f"{text} (of type {type(value).__name__})"


def resolve_backend(backend: str, world_size: int) -> str:
    """The backend `launch` uses: ``"auto"`` becomes NCCL if every rank can have a GPU."""
    import torch.distributed as dist

    gpus = _gpu_count()
    if backend == "auto":
        return "nccl" if gpus >= world_size and dist.is_nccl_available() else "gloo"
    if backend == "nccl":
        if not dist.is_nccl_available():
            raise RuntimeError(
                "backend='nccl' needs a CUDA build of torch with NCCL, and this one has none. "
                "Use backend='gloo' to run on the CPU, or backend='auto' to choose for you."
            )
        if gpus < world_size:
            have = f"this machine has {gpus} GPU{'s' if gpus != 1 else ''}"
            fix = f"use world_size={gpus} or fewer, " if gpus else ""
            raise RuntimeError(
                f"backend='nccl' needs one GPU per rank, but world_size={world_size} and {have}. "
                f"To go on, {fix}use backend='gloo' to run every rank on the CPU, or "
                "backend='auto' to choose for you."
            )
    return backend


def _gpu_count() -> int:
    import torch

    if not torch.backends.cuda.is_built():
        return 0
    # device_count asks NVML, so the launching process never initialises CUDA itself.
    return torch.cuda.device_count()


def _usable_cpus() -> int:
    """The CPUs this process may run on (fewer than the machine's in a container or a job)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _pickled_warning_filters() -> list[tuple[str, bytes]]:
    """The caller's warning filters, each pickled on its own with its category's module (a
    filter that will not pickle is left out)."""
    pickled = []
    for item in warnings.filters:
        with contextlib.suppress(Exception):
            pickled.append((item[2].__module__, cloudpickle.dumps(item)))
    return pickled


def _make_room_for_pipes(world_size: int) -> None:
    """A launch holds 8 file descriptors per rank for a moment: raise the limit if it is low."""
    try:
        import resource
    except ImportError:  # not on this platform
        return
    needed = 8 * world_size + 256
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < needed:
            raise OSError(
                f"world_size={world_size} needs about {needed} open files, but this process may open "
                f"only {soft} (see `ulimit -n`). Use fewer ranks, or raise the limit."
            )


def _rank_environment() -> dict[str, str]:
    env = dict(os.environ)
    if "GLOO_SOCKET_IFNAME" not in env:
        # All ranks are on this machine: keep Gloo on the loopback interface, which always
        # exists, rather than whatever the host name resolves to.
        loopback = next((name for _, name in socket.if_nameindex() if name.startswith("lo")), None)
        if loopback:
            env["GLOO_SOCKET_IFNAME"] = loopback
    return env


# -- pickling the function --------------------------------------------------------------------


def pickle_function(fn: Callable[..., Any], args: tuple, kwargs: dict) -> bytes:
    """Pickle ``(fn, args, kwargs)`` for the ranks, or say exactly what cannot be pickled."""
    __tracebackhide__ = True
    try:
        return cloudpickle.dumps((fn, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 - pickling can fail with many error types
        problems = _unpicklable_parts(fn, args, kwargs) or [f"{_describe(fn)}: {exc}"]
        listing = "\n".join(f"  - {p}" for p in problems)
        raise TypeError(
            "launch cannot send your function to the ranks. Each rank is a separate process and "
            "gets a pickled copy of the function and of everything it uses, and these cannot be "
            f"pickled:\n{listing}\n"
            "Create such objects inside the function (each rank then makes its own), or pass "
            "something that can be copied instead, such as a file name."
        ) from exc


def _unpicklable_parts(fn: Any, args: tuple, kwargs: dict) -> list[str]:
    problems: list[str] = []
    for i, value in enumerate(args):
        _explain(value, f"the extra argument args[{i}]", problems, set())
    for key, value in kwargs.items():
        _explain(value, f"the keyword argument {key}=", problems, set())
    _explain(fn, "the function", problems, set())
    return problems


def _explain(value: Any, label: str, problems: list[str], seen: set[int]) -> None:
    """Add to ``problems`` the innermost parts of ``value`` that cannot be pickled."""
    if id(value) in seen or _pickles(value):
        return
    seen.add(id(value))
    if isinstance(value, types.FunctionType):
        before = len(problems)
        name = value.__name__
        for var, inner in _referenced_values(value):
            _explain(inner, f"{var}, used by {name}", problems, seen)
        if len(problems) > before:
            return
    problems.append(f"{label}: {_kind(value)}")


def _pickles(value: Any) -> bool:
    try:
        cloudpickle.dumps(value)
        return True
    except Exception:  # noqa: BLE001
        return False


def _referenced_values(fn: types.FunctionType) -> list[tuple[str, Any]]:
    """The globals, closure variables and defaults a function uses, as (description, value)."""
    found = []
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=False):
        with contextlib.suppress(ValueError):
            found.append((f"the variable {name!r} from an enclosing function", cell.cell_contents))
    for name in sorted(_global_names(fn.__code__)):
        if name in fn.__globals__:
            found.append((f"the global {name!r}", fn.__globals__[name]))
    for i, default in enumerate(fn.__defaults__ or ()):
        found.append((f"default value #{i + 1}", default))
    for key, default in (fn.__kwdefaults__ or {}).items():
        found.append((f"the default of {key}", default))
    return found


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


_KINDS = {
    "TextIOWrapper": "an open file",
    "BufferedReader": "an open file",
    "BufferedWriter": "an open file",
    "FileIO": "an open file",
    "lock": "a lock",
    "RLock": "a lock",
    "socket": "a socket",
    "generator": "a generator",
    "Thread": "a thread",
    "Connection": "a connection",
}


def _kind(value: Any) -> str:
    cls = type(value)
    qualified = f"{cls.__module__}.{cls.__qualname__}"
    kind = _KINDS.get(cls.__name__)
    return f"{kind} ({qualified})" if kind else f"a {qualified}, which cannot be pickled"


# -- one launch -------------------------------------------------------------------------------


class _RankPipes:
    """The four pipes between the launching process and one rank (see `launcher.rank`)."""

    def __init__(self) -> None:
        self.out_r, self.out_w = os.pipe()
        self.err_r, self.err_w = os.pipe()
        self.result_r, self.result_w = os.pipe()
        self.control_r, self.control_w = os.pipe()
        os.set_blocking(self.result_r, False)  # read whatever is there; frames are assembled

    def rank_ends(self) -> tuple[int, int, int, int]:
        return (self.out_w, self.err_w, self.result_w, self.control_r)

    def ours(self) -> tuple[int, int, int]:
        return (self.out_r, self.err_r, self.result_r)

    def close_control(self) -> None:
        """Close our end of the control pipe, once: a rank whose server is gone exits on this."""
        if self.control_w >= 0:
            _close_quietly(self.control_w)
            self.control_w = -1


class _Launch:
    """One call of `launch`: start the ranks, relay their output, collect what they send.

    While the ranks run, it looks at where they are now and then (at 0.5 s, 1 s, 2 s, ... and
    soon after a rank returns early). Two looks half a second apart that show ranks which can never
    finish (`never_finishing`), in the same place and idle, end the launch with a LaunchHang
    long before the timeout.
    """

    def __init__(self, spec: LaunchSpec, timeout: float) -> None:
        self.spec = spec
        self.size = spec.world_size
        self.timeout = timeout
        self.id = next(_launch_ids)
        self.stop_wait = STOP_WAIT_S * (5 if spec.backend == "nccl" else 1)  # CUDA teardown is slow
        self.results: dict[int, bytes] = {}
        self.failures: dict[int, RankFailure] = {}
        self.exit_codes: dict[int, int] = {}
        self.stopped: list[int] = []  # ranks still running when we stopped them
        self.stop_at: float | None = None  # when to stop the ranks still running
        self.stop_sent = False
        self.printer = _OutputPrinter()
        self.frames = [Frames() for _ in range(self.size)]
        self.looks_asked = [0] * self.size  # stack requests sent to each rank
        self.server: Any = None
        self.pipes: list[_RankPipes] = []
        # Looking at where the ranks are:
        self.look: dict[int, RankStack] = {}  # answers to the look under way, or to the last one
        self.look_waiting: set[int] = set()  # ranks asked that have not answered yet
        self.look_ends_at = 0.0
        self.previous_look: dict[int, RankStack] = {}
        self.look_interval = FIRST_LOOK_S
        self.next_look_at = 0.0
        self.final_look = False  # the look taken as the timeout runs out
        self.timed_out = False
        self.deadlocked = False

    def run(self) -> list[Any] | BaseException:
        """Run the ranks to the end; return their results, or the error to raise."""
        __tracebackhide__ = True
        store_dir = None
        try:
            store_dir = tempfile.mkdtemp(prefix="launch-")
            self.spec.store_path = os.path.join(store_dir, "store")
            for _ in range(self.size):
                self.pipes.append(_RankPipes())
            try:
                self.server = get_server()
                self.server.start_ranks(self.id, pickle.dumps(self.spec), [p.rank_ends() for p in self.pipes])
            except BaseException:
                if self.server is not None:  # it may hold half a message, or ranks: stop it all
                    retire(self.server)
                raise
            finally:
                for p in self.pipes:
                    for fd in p.rank_ends():
                        _close_quietly(fd)
            self._relay()
        except BaseException:
            self._abort()
            raise
        finally:
            self.printer.flush()
            for p in self.pipes:
                p.close_control()
                for fd in p.ours():
                    _close_quietly(fd)
            if store_dir:
                shutil.rmtree(store_dir, ignore_errors=True)
        return self._outcome()

    # The main loop: everything the ranks send arrives here, in the calling thread, so their
    # output lands in the notebook cell that called launch.
    def _relay(self) -> None:
        selector = selectors.DefaultSelector()
        for rank, p in enumerate(self.pipes):
            selector.register(p.out_r, selectors.EVENT_READ, ("out", rank))
            selector.register(p.err_r, selectors.EVENT_READ, ("err", rank))
            selector.register(p.result_r, selectors.EVENT_READ, ("message", rank))
        selector.register(self.server.fileno(), selectors.EVENT_READ, ("server", None))
        open_pipes = 3 * self.size
        start = time.monotonic()
        self.deadline = start + self.timeout
        self.next_look_at = start + FIRST_LOOK_S
        end_at = None  # stop relaying then, even if a pipe is still open
        for notice in self.server.notices():
            self._on_notice(notice)
        try:
            while True:
                now = time.monotonic()
                all_exited = len(self.exit_codes) == self.size
                if all_exited and not open_pipes:
                    return
                if not self.stop_sent:
                    self._watch(now)
                if self.stop_at is not None and now >= self.stop_at and not self.stop_sent:
                    self._stop_ranks()
                    end_at = now + self.stop_wait
                if all_exited and end_at is None:
                    end_at = now + OUTPUT_DRAIN_S  # a program the rank started may hold a pipe open
                if end_at is not None and now >= end_at:
                    return
                wake = [self.stop_at, end_at]
                if not self.stop_sent:
                    wake += [
                        self.deadline,
                        self.next_look_at,
                        self.look_ends_at if self.look_waiting else None,
                    ]
                wake = [t for t in wake if t is not None and t > now]
                for key, _ in selector.select(min(wake) - now if wake else None):
                    kind, rank = key.data
                    if kind == "server":
                        for notice in self.server.notices():  # raises if the server is gone
                            self._on_notice(notice)
                        continue
                    data = read_available(key.fd)
                    if data:
                        if kind == "message":
                            for message in self.frames[rank].feed(data):
                                self._on_message(rank, *message)
                        else:
                            self.printer.feed(rank, kind, data)
                        continue
                    if data is None:  # nothing to read after all
                        continue
                    selector.unregister(key.fd)
                    open_pipes -= 1
        finally:
            selector.close()

    def _on_message(self, rank: int, kind: str, body: Any) -> None:
        if kind == "result":
            self.results[rank] = body
            if len(self.results) == self.size and not self.stop_sent:
                self._send_all(b"x")  # every rank returned: they may exit
                self._schedule_stop(RELEASE_WAIT_S)  # ...and must, soon
            else:  # one rank is done early: soon look at whether the others can still finish
                self.next_look_at = min(self.next_look_at, time.monotonic() + AFTER_RETURN_LOOK_S)
        elif kind == "error":
            self.failures[rank] = RankFailure(
                rank=rank,
                exception=_unpickle_exception(body),
                traceback=_rank_traceback(body),
                phase=body["phase"],
            )
            self._schedule_stop(FAILURE_GRACE_S)
        elif kind == "stack" and rank in self.look_waiting and body["look"] == self.looks_asked[rank]:
            self.look[rank] = RankStack(rank, body["phase"], body["frames"], body["cpu_s"])
            self.look_waiting.discard(rank)
            if not self.look_waiting:
                self._finish_look()

    def _on_notice(self, notice: tuple) -> None:
        kind, launch_id, rank, code = notice
        if kind != "exited" or launch_id != self.id:
            return
        self.exit_codes[rank] = code
        self.look_waiting.discard(rank)
        if rank in self.failures or (rank in self.results and code == 0):
            return
        if self.stop_sent and (code in (-signal.SIGKILL, EXIT_ORPHANED) or self.timed_out or self.deadlocked):
            return  # we stopped it (or stopped a hang: how it died then is beside the point)
        # A rank died. Others may die the same way at the same moment: give them a moment to
        # say so (what the rest then report about lost connections is set aside as a consequence).
        phase = RETURNED if rank in self.results else RUNNING
        self.failures[rank] = RankFailure(rank=rank, exitcode=code, phase=phase)
        self._schedule_stop(FAILURE_GRACE_S)

    def _schedule_stop(self, delay: float) -> None:
        when = time.monotonic() + delay
        self.stop_at = when if self.stop_at is None else min(self.stop_at, when)

    def _send_all(self, request: bytes) -> None:
        for rank, p in enumerate(self.pipes):
            if rank not in self.exit_codes and p.control_w >= 0:
                with contextlib.suppress(OSError):
                    os.write(p.control_w, request)

    # -- looking at where the ranks are ---------------------------------------------------

    def _watch(self, now: float) -> None:
        if self.look_waiting:
            if now >= self.look_ends_at:
                self._finish_look()
            return
        if self.stop_at is not None or len(self.results) == self.size:
            return
        if self.final_look and now >= self.deadline:
            self.timed_out = True  # the ranks' answers to the final look are in self.look
            self._schedule_stop(0.0)
        elif not self.final_look and now >= self.deadline - ANSWER_WAIT_S:
            self.final_look = True  # ask now, so that the report is ready when time runs out
            self._start_look(now)
        elif now >= self.next_look_at:
            self._start_look(now)

    def _start_look(self, now: float) -> None:
        self.look = {}
        self.look_waiting = {
            r for r in range(self.size) if r not in self.results and r not in self.exit_codes
        }
        self.look_ends_at = now + ANSWER_WAIT_S
        for rank in self.look_waiting:
            with contextlib.suppress(OSError):
                os.write(self.pipes[rank].control_w, b"s")
                self.looks_asked[rank] += 1
        if not self.look_waiting:
            self._finish_look()

    def _finish_look(self) -> None:
        now = time.monotonic()
        self.look_waiting = set()
        if self.final_look:
            return  # _watch declares the timeout at the deadline, unless the ranks finish first
        stuck = never_finishing(self.look, set(self.results), self.size)
        seen_before = stuck and all(
            rank in self.previous_look and self.look[rank].same_place(self.previous_look[rank])
            for rank in stuck
        )
        if seen_before:
            self.deadlocked = True
            self._schedule_stop(0.0)
            return
        if stuck:  # confirm with a second look: a snapshot can catch a message in flight
            self.next_look_at = now + CONFIRM_LOOK_S
        else:
            self.look_interval *= 2
            self.next_look_at = now + self.look_interval
        self.previous_look = self.look

    # -- stopping -------------------------------------------------------------------------

    def _stop_ranks(self) -> None:
        """Kill every rank of this launch that is still running."""
        self.stop_sent = True
        self.stopped = [r for r in range(self.size) if r not in self.exit_codes and r not in self.failures]
        for p in self.pipes:
            p.close_control()
        if self.server.alive():
            try:
                self.server.kill(self.id)
            except BaseException:
                retire(self.server)  # the kill may be half sent: stopping the server stops the ranks
                raise

    def _abort(self) -> None:
        """Stop the ranks after an interrupt or an internal error, and wait until they are gone."""
        if self.server is None:
            return
        give_up_at = time.monotonic() + self.stop_wait
        while True:
            try:
                if not self.stop_sent:
                    self._stop_ranks()
                while len(self.exit_codes) < self.size and self._wait_for_exit(give_up_at):
                    pass
                return
            except KeyboardInterrupt:
                continue  # a second interrupt must not leave ranks behind
            except (OSError, ValueError, ForkServerError):
                return

    def _wait_for_exit(self, give_up_at: float) -> bool:
        """Wait for notices from the fork server; False once there is none to wait for."""
        remaining = give_up_at - time.monotonic()
        if remaining <= 0 or not self.server.alive():
            return False
        if not wait_readable(self.server.fileno(), remaining):
            return False
        for notice in self.server.notices():
            self._on_notice(notice)
        return True

    def _outcome(self) -> list[Any] | BaseException:
        if self.failures:
            failures = [self.failures[rank] for rank in sorted(self.failures)]
            lost_peer = secondary_failures(failures)
            primary = [f for f in failures if f not in lost_peer] or failures
            stopped = sorted((set(self.stopped) | {f.rank for f in lost_peer}) - {f.rank for f in primary})
            return LaunchError(failure_report(primary, self.size, stopped), primary)
        if self.timed_out or self.deadlocked:
            returned = sorted(self.results)
            silent = [r for r in range(self.size) if r not in self.look and r not in self.results]
            timeout = self.timeout if self.timed_out else None
            message = hang_report(self.size, self.look, returned, silent, timeout)
            return LaunchHang(message, [], {r: s.format() for r, s in self.look.items()})
        try:
            return [pickle.loads(self.results[rank]) for rank in range(self.size)]
        except Exception as exc:  # noqa: BLE001
            return LaunchError(
                f"the ranks finished, but their results could not be unpickled here: "
                f"{type(exc).__name__}: {exc}",
                [],
            )


def _rank_traceback(report: dict[str, Any]) -> str:
    """The rank's traceback, formatted here if it can be rebuilt here (for a notebook's source
    lines), else as the rank formatted it."""
    if report["traceback"] is not None:
        with contextlib.suppress(Exception):
            return format_traceback(pickle.loads(report["traceback"]))
    return format_traceback(report["traceback_text"])


def _unpickle_exception(report: dict[str, Any]) -> BaseException:
    if report["exception"] is not None:
        try:
            return pickle.loads(report["exception"])
        except Exception:  # noqa: BLE001
            pass
    return RankException(report["type_name"], report["message"])


def _close_quietly(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


class _OutputPrinter:
    """Relays the ranks' output line by line, each line prefixed with its rank."""

    def __init__(self) -> None:
        self.partial: dict[tuple[int, str], bytes] = {}

    def feed(self, rank: int, stream: str, data: bytes) -> None:
        *lines, rest = (self.partial.get((rank, stream), b"") + data).split(b"\n")
        self.partial[(rank, stream)] = rest
        if lines:
            self._write(
                stream, "".join(f"[rank {rank}] {line.decode('utf-8', 'replace')}\n" for line in lines)
            )

    def flush(self) -> None:
        for (rank, stream), rest in sorted(self.partial.items()):
            if rest:
                self._write(stream, f"[rank {rank}] {rest.decode('utf-8', 'replace')}\n")
        self.partial.clear()

    @staticmethod
    def _write(stream: str, text: str) -> None:
        # Looked up on every write: IPython and pytest swap sys.stdout per cell and per test.
        target = sys.stdout if stream == "out" else sys.stderr
        if target is not None:
            target.write(text)
            target.flush()


# -- torchrun ---------------------------------------------------------------------------------


def _under_torchrun() -> bool:
    """Started by torchrun (or a launcher that sets everything torchrun does)."""
    env = os.environ
    keys = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    return "TORCHELASTIC_RUN_ID" in env or all(k in env for k in keys)


def _run_in_torchrun_rank(
    fn: Callable[..., Any], world_size: int, args: tuple, kwargs: dict, backend: str
) -> Any:
    """Run fn on this process's rank in torchrun's group (created here if needed)."""
    import torch
    import torch.distributed as dist

    if not callable(fn):
        raise TypeError(f"launch's first argument must be a function; got {_describe(fn)}.")
    if not dist.is_initialized():
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        chosen = resolve_backend(backend, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
        if chosen == "nccl":
            torch.cuda.set_device(local_rank)
        dist.init_process_group(chosen)
        atexit.register(_destroy_process_group)
    rank, size = dist.get_rank(), dist.get_world_size()
    if world_size != size:
        warnings.warn(
            f"launch(..., world_size={world_size}) runs on the {size} ranks that torchrun started.",
            stacklevel=3,
        )
    return fn(rank, size, *args, **kwargs)


def _destroy_process_group() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
