"""What runs inside one rank process: set up its output, join the process group, run fn, report back.

The fork server (`launcher.forkserver`) forks a rank process and calls `run_rank`, which never
returns. The rank talks to the launching process through four pipes:

- its stdout and stderr (file descriptors 1 and 2 are replaced by them, so C-level writes go
  there too), which the launching process prints with a ``[rank r]`` prefix;
- a result pipe, on which it sends framed messages (`send_message`): that its function returned,
  then its result (or its error); and a snapshot of its threads' Python stacks when asked;
- a control pipe, from which it reads requests: ``b"s"``, send your stack; ``b"x"``, every rank
  has returned, so exit. End of file on it means the launching process stopped the launch or
  is gone, and the rank exits at once.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import functools
import io
import os
import pickle
import signal
import sys
import threading
import time
import traceback
import warnings
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, NoReturn

import cloudpickle
import torch
import torch.distributed as dist

from . import guard
from .resources import track_in_rank
from .wire import (
    EXIT_FAILED,
    EXIT_INTERNAL,
    EXIT_ORPHANED,
    JOINING,
    LOADING,
    RETURNED,
    RUNNING,
    SENDING,
    STARTING,
    LaunchSpec,
    frame,
    pickle_exception,
    pickle_result,
)

# How long a rank that raised waits to be stopped by the launching process. It waits instead
# of exiting so that the other ranks do not see a closed connection and report a second,
# misleading error; the launching process stops every rank well before this.
FAILED_RANK_LINGER_S = 60.0


@dataclass
class RankContext:
    """Set inside a launched rank; `get_device` and nested-launch detection read it."""

    rank: int
    world_size: int
    backend: str


_context: RankContext | None = None
_phase = STARTING
_send_lock = threading.Lock()
_released = threading.Event()  # set when the launching process says every rank has returned


def current_context() -> RankContext | None:
    """This process's rank context, or None outside a rank started by `launch`."""
    return _context


def get_device(rank: int | None = None) -> torch.device:
    """The device a rank should put its tensors on: ``cuda:<local rank>`` under NCCL, else CPU.

    Call it inside a function run by `launch` (or under ``torchrun``). ``rank`` defaults to
    this process's rank; passing it explicitly, as ``get_device(rank)``, gives the same answer.
    """
    if _context is not None:
        backend, local_rank = _context.backend, _context.rank if rank is None else rank
    elif dist.is_available() and dist.is_initialized():
        backend = dist.get_backend()
        local_rank = int(os.environ.get("LOCAL_RANK", dist.get_rank())) if rank is None else rank
    else:
        raise RuntimeError(
            "get_device() tells a rank which device to use, so call it inside the function "
            "you pass to launch (or in a script started by torchrun)."
        )
    if backend == "nccl":
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    return torch.device("cpu")


def send_message(fd: int, kind: str, body: Any) -> None:
    """Send one framed message ``(kind, body)`` on a pipe (thread-safe). Bodies are plain data
    and bytes, so the launching process can always read them."""
    data = frame((kind, body))
    with _send_lock:
        _write_all(fd, data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def run_rank(
    spec_bytes: bytes, rank: int, server: int, out_fd: int, err_fd: int, result_fd: int, control_fd: int
) -> NoReturn:
    """Run one rank to completion and exit the process; called in a freshly forked child."""
    global _context, _phase
    try:
        _redirect_output(out_fd, err_fd)
        for fd in (result_fd, control_fd):
            os.set_inheritable(fd, False)  # programs the rank starts must not hold them open
        _die_with(server)
        spec: LaunchSpec = pickle.loads(spec_bytes)
        _prepare_process(spec, rank)
        look = None
        if spec.guarded:
            guard.install(*spec.guarded, rank=True)
            # The guard's look when the function returns, held in this frame, which no code can
            # reach: through names (``guard.verify``, ``sys.audit``) code in the rank could replace.
            look = functools.partial(sys.audit, guard.VERIFY_EVENT)
        _context = RankContext(rank, spec.world_size, spec.backend)
        threading.Thread(target=_serve_control, args=(control_fd, result_fd), daemon=True).start()
    except BaseException:  # noqa: BLE001 - the rank cannot run at all; say why on its stderr
        traceback.print_exc()
        os._exit(EXIT_INTERNAL)

    try:
        _phase = LOADING
        fn, args, kwargs = cloudpickle.loads(spec.payload)
        _phase = JOINING
        _init_process_group(spec, rank)
        _phase = RUNNING
        result = fn(rank, spec.world_size, *args, **kwargs)
        if look is not None:
            look()  # what this rank's checks relied on, unchanged while it ran
    except BaseException as exc:  # noqa: BLE001 - every failure is reported, SystemExit included
        _report_failure(result_fd, exc)

    try:
        if spec.backend == "nccl":
            # The result is final only once the GPU is done: work still queued there is part
            # of the function's running time (and where a GPU hang shows).
            torch.cuda.synchronize()
    except BaseException as exc:  # noqa: BLE001
        _report_failure(result_fd, exc)
    _phase = SENDING
    send_message(result_fd, "returning", None)  # from now on, the launch's timeout is over
    try:
        data = pickle_result(result, spec.result_folders)
    except BaseException as exc:  # noqa: BLE001
        _report_failure(result_fd, _UnsendableResult(result, exc))
    send_message(result_fd, "result", data)

    # No rank tears its connections down while a peer may still talk to it: each waits until
    # the launching process has heard from all of them. (This does what a closing barrier
    # would, without a collective that torch's checks would also have to verify.)
    _phase = RETURNED
    _released.wait()
    try:
        if spec.backend == "nccl" and dist.is_initialized():
            dist.destroy_process_group()  # Gloo's connections simply close with the process
    except BaseException as exc:  # noqa: BLE001
        _report_failure(result_fd, exc)
    _flush_output()
    os._exit(0)


def _redirect_output(out_fd: int, err_fd: int) -> None:
    # Through fresh descriptors first, in case one of the pipes arrived as fd 1 or 2 itself.
    out, err = os.dup(out_fd), os.dup(err_fd)
    os.close(out_fd)
    os.close(err_fd)
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.close(out)
    os.close(err)
    # Line-buffered, so that each print reaches the notebook as soon as its line is complete.
    sys.stdout = sys.__stdout__ = _line_buffered_stream(1)
    sys.stderr = sys.__stderr__ = _line_buffered_stream(2)
    _line_buffer_c_stdout()
    faulthandler.enable(file=sys.stderr)  # a segfault prints the Python stack before dying


def _line_buffered_stream(fd: int) -> io.TextIOWrapper:
    raw = io.FileIO(fd, "w", closefd=False)
    return io.TextIOWrapper(raw, encoding="utf-8", errors="backslashreplace", line_buffering=True)


def _line_buffer_c_stdout() -> None:
    """Make C's stdout line-buffered too, so that printf output is not held back."""
    for symbol in ("stdout", "__stdoutp"):  # glibc's name, then macOS's
        with contextlib.suppress(OSError, ValueError, AttributeError):
            libc = ctypes.CDLL(None)
            libc.setvbuf(ctypes.c_void_p.in_dll(libc, symbol), None, 1, 0)  # 1 is _IOLBF
            return


def _flush_output() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).fflush(None)


def _die_with(server: int) -> None:
    """On Linux, have the kernel kill this rank if the fork server dies."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            pr_set_pdeathsig = 1
            ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != server:  # it died before that took effect
        os._exit(EXIT_ORPHANED)


def _prepare_process(spec: LaunchSpec, rank: int) -> None:
    # Interrupts are the launching process's business: it stops every rank itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.clear()
    os.environ.update(spec.env)
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(spec.world_size),
        LOCAL_WORLD_SIZE=str(spec.world_size),
    )
    os.chdir(spec.cwd)
    sys.path[:] = spec.sys_path
    warnings.filters[:] = _warning_filters(spec.warning_filters)
    # The fork server's thread pool was sized when it started, from its environment then:
    # size this rank's now, as the launching process decided for this launch.
    torch.set_num_threads(spec.num_threads)
    track_in_rank(spec.resource_log, rank)


def _warning_filters(pickled: list[tuple[str, bytes]]) -> list:
    """The caller's warning filters that can matter here, leaving out any that cannot be rebuilt.

    A filter on a warning category from a module this process has not imported is left out:
    rebuilding it would import that module (IPython's, in a notebook) into every rank.
    """
    filters = []
    for module, data in pickled:
        if module in sys.modules or module == "__main__":
            with contextlib.suppress(Exception):
                filters.append(cloudpickle.loads(data))
    return filters


def _init_process_group(spec: LaunchSpec, rank: int) -> None:
    if spec.check_collectives:
        # Torch then checks, before each collective, that every rank calls the same one with the
        # same shapes, and names the mismatch instead of hanging or returning garbage.
        dist.set_debug_level(dist.DebugLevel.DETAIL)
    device_id = None
    if spec.backend == "nccl":
        torch.cuda.set_device(rank)
        device_id = torch.device("cuda", rank)
    store = dist.FileStore(spec.store_path, spec.world_size)
    dist.init_process_group(
        spec.backend,
        store=store,
        rank=rank,
        world_size=spec.world_size,
        timeout=timedelta(seconds=spec.collective_timeout_s),
        device_id=device_id,
    )
    if spec.check_collectives:
        _give_ddp_an_unchecked_group()


def _give_ddp_an_unchecked_group() -> None:
    """Let torch's DistributedDataParallel work beside the collective checks.

    In torch 2.13 on Gloo, making a DistributedDataParallel model on a process group that checks
    its collectives (TORCH_DISTRIBUTED_DEBUG=DETAIL wraps it) crashes the process (SIGSEGV, in
    DDP's logger). A DDP model given no group of its own gets a plain group of every rank
    instead, made without the checks when the first one is made (every rank makes it, as every
    rank makes the model). Its own collectives then go unchecked; all others stay checked.
    """
    cls = torch.nn.parallel.DistributedDataParallel
    real_init = cls.__init__
    plain: list[Any] = []

    def init(self: Any, module: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) < 6 and kwargs.get("process_group") is None:  # process_group is the 7th
            if not plain:
                level = dist.get_debug_level()
                dist.set_debug_level(dist.DebugLevel.OFF)
                try:
                    plain.append(dist.new_group())
                finally:
                    dist.set_debug_level(level)
            kwargs["process_group"] = plain[0]
        real_init(self, module, *args, **kwargs)

    cls.__init__ = init


class _UnsendableResult(Exception):
    def __init__(self, result: Any, cause: BaseException) -> None:
        super().__init__(
            f"a {type(result).__name__} ({type(cause).__name__}: {cause}). Return tensors, numbers, "
            "strings, or lists, tuples and dicts of them."
        )


def _report_failure(result_fd: int, exc: BaseException) -> NoReturn:
    """Send the error to the launching process, then wait to be stopped by it.

    The traceback goes twice: as text, and pickled, for the launching process to format with
    its own source lines (a notebook's cells) if it can rebuild it.
    """
    try:
        tb_exc = _traceback_without_launcher_frames(exc)
        message = _message(exc)
        plain, rebuilt = pickle_exception(exc, message)
        report = {
            "phase": _phase,
            "traceback": _pickled(tb_exc),
            "traceback_text": "".join(tb_exc.format()),
            "exception": plain,
            "exception_rebuilt": rebuilt,
            "type_name": type(exc).__name__,
            "message": message,
        }
        send_message(result_fd, "error", report)
        _flush_output()
    except BaseException:  # noqa: BLE001 - the pipe is gone; nothing more to do
        os._exit(EXIT_INTERNAL)
    time.sleep(FAILED_RANK_LINGER_S)
    os._exit(EXIT_FAILED)


def _message(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - an exception whose __str__ fails
        return f"<{type(exc).__qualname__} whose message could not be shown>"


def _traceback_without_launcher_frames(exc: BaseException) -> traceback.TracebackException:
    """The exception's traceback from the user's function in, without hidden frames.

    Like IPython and pytest, it leaves out frames whose code sets ``__tracebackhide__``.
    """
    tb_exc = traceback.TracebackException.from_exception(exc, lookup_lines=False)
    shown = [
        (frame, lineno)
        for frame, lineno in traceback.walk_tb(exc.__traceback__)
        if frame.f_code is not run_rank.__code__ and not _hides_itself(frame)
    ]
    tb_exc.stack = traceback.StackSummary.extract(iter(shown), lookup_lines=False)
    return tb_exc


def _pickled(obj: Any) -> bytes | None:
    """cloudpickle of ``obj`` (so that classes defined in a notebook travel too), or None."""
    try:
        return cloudpickle.dumps(obj)
    except Exception:  # noqa: BLE001
        return None


def _serve_control(control_fd: int, result_fd: int) -> None:
    """Answer stack requests and the release; exit the rank when the control pipe closes."""
    main_thread_id = threading.main_thread().ident
    own_id = threading.get_ident()
    asked = 0
    while True:
        try:
            request = os.read(control_fd, 1)
        except OSError:
            request = b""
        if not request:
            _flush_output()
            os._exit(EXIT_ORPHANED)
        if request == b"s":
            asked += 1  # numbered, so that a late answer is not taken for the next look's
            frames = sys._current_frames()
            stack = {
                "phase": _phase,
                "frames": _describe_stack(frames.get(main_thread_id)),
                "threads": _other_threads(frames, {main_thread_id, own_id}),
                "cpu_s": time.process_time(),
                "look": asked,
            }
            # The snapshot holds every frame of the rank, and so their local variables: kept until
            # the next look, it would keep a function's temporaries alive after it returned.
            del frames
            send_message(result_fd, "stack", stack)
        elif request == b"x":
            _released.set()


def _other_threads(frames: dict[int, Any], skip: set[int]) -> list[dict[str, Any]]:
    """The Python threads other than ``skip`` (the main thread and this one), with their stacks.

    A rank whose main thread waits can still be unblocked by another of its threads, so the
    launching process needs to know of them before it calls anything a deadlock.
    """
    threads = {thread.ident: thread for thread in threading.enumerate()}
    # Threads that never do a rank's work: tqdm's progress-bar monitor, which lives forever.
    skip = skip | {ident for ident, thread in threads.items() if type(thread).__name__ == "TMonitor"}
    threading_module = threading.__file__
    return [
        {
            "name": threads[ident].name if ident in threads else f"thread {ident}",
            "frames": [f for f in _describe_stack(frame) if f["filename"] != threading_module],
        }
        for ident, frame in frames.items()
        if ident not in skip
    ]


def _describe_stack(frame: Any) -> list[dict[str, Any]]:
    """The main thread's stack, outermost first, from the user's function inwards, as plain data."""
    frames = []
    while frame is not None and frame.f_code is not run_rank.__code__:
        if _hides_itself(frame):
            frame = frame.f_back
            continue
        frames.append(
            {
                "filename": frame.f_code.co_filename,
                "lineno": frame.f_lineno,
                "name": frame.f_code.co_name,
                "peers": _peer_arguments(frame),
            }
        )
        frame = frame.f_back
    frames.reverse()
    return frames


def _hides_itself(frame: Any) -> bool:
    """Whether the frame's code sets ``__tracebackhide__`` (IPython and pytest hide such frames).

    Read from the code, not from ``frame.f_locals``: before Python 3.13, reading a running frame's
    f_locals stores a copy of its local variables on the frame, which keeps each one alive until
    the function returns, even after the function deletes it. A look at a rank's stack must not
    change what the rank's memory holds (the checks count live tensors with weak references).
    """
    return "__tracebackhide__" in frame.f_code.co_varnames


def _peer_arguments(frame: Any) -> dict[str, Any]:
    """For a torch.distributed call: the ranks it waits for, as global ranks.

    ``src``/``dst`` name the one peer of a send or recv (absent for a recv from any source);
    ``group`` lists the ranks of the call's process group (None: all of them).
    """
    if not frame.f_code.co_filename.endswith(os.path.join("distributed", "distributed_c10d.py")):
        return {}
    found: dict[str, Any] = {}
    local = frame.f_locals
    group = local.get("group")
    for name in ("src", "dst"):
        value = local.get(name)
        if not isinstance(value, int) and isinstance(local.get(f"group_{name}"), int):
            with contextlib.suppress(Exception):  # a rank within `group`: make it global
                value = dist.get_global_rank(group or dist.group.WORLD, local[f"group_{name}"])
        if isinstance(value, int):
            found[name] = value
    with contextlib.suppress(Exception):  # not a group torch knows: leave it out
        found["group"] = dist.get_process_group_ranks(group) if group is not None else None
    return found
