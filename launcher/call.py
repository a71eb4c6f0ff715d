"""`launch` itself: check the call, decide the backend and the threads, pickle the function,
then hand the ranks to `launcher.supervise` (or, under torchrun, run the function right here)."""

from __future__ import annotations

import collections
import contextlib
import functools
import inspect
import io
import math
import numbers
import operator
import os
import pickle
import socket
import sys
import types
import warnings
from collections.abc import Callable
from typing import Any

import cloudpickle

from . import guard
from .rank import current_context
from .supervise import Supervisor
from .torchrun import local_world_size, run_in_torchrun_rank, under_torchrun
from .wire import LaunchSpec

DEFAULT_TIMEOUT_S = 30.0
MAX_LOCAL_WORLD_SIZE = 64
MAX_TIMEOUT_S = 86_400.0
BACKENDS = ("auto", "gloo", "nccl")
# launch's own keyword arguments, which therefore never reach fn.
OPTIONS = {"backend": "auto", "timeout": DEFAULT_TIMEOUT_S, "check_collectives": True, "num_threads": None}


def launch(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    backend: str = "auto",
    timeout: float = DEFAULT_TIMEOUT_S,
    check_collectives: bool = True,
    num_threads: int | None = None,
    **kwargs: Any,
) -> list[Any]:
    """Run ``fn(rank, world_size, *args, **kwargs)`` on ``world_size`` ranks; return their results.

    Each rank is its own process, inside an initialised default process group
    (``torch.distributed`` works as usual); the group is gone when ``launch`` returns.

    Args:
        fn: the function every rank runs. It may be defined in a notebook cell, a closure or a
            lambda; it is pickled (with cloudpickle) and so is everything it uses.
        world_size: the number of ranks, 1 or more.
        *args, **kwargs: passed on to ``fn`` after ``rank`` and ``world_size``. The names of
            launch's own options below never reach ``fn``: to give ``fn`` a parameter called
            ``timeout`` (say), pass ``functools.partial(fn, timeout=...)``.
        backend: ``"nccl"`` (one GPU per rank, rank r on ``cuda:r``), ``"gloo"`` (CPU), or
            ``"auto"``: NCCL when there are at least ``world_size`` GPUs, else Gloo.
            ``get_device()`` tells a rank which device to use.
        timeout: seconds the ranks may run their function. After that, ``launch`` raises
            `LaunchHang` showing where each rank is stuck. A deadlock it can prove (say, a recv
            from a rank that already returned) is reported within about a second instead.
            Sending the results back is not counted.
        check_collectives: have torch check, before every collective, that all ranks call the
            same one with the same shapes (``TORCH_DISTRIBUTED_DEBUG=DETAIL``), so a mismatch
            is reported at once instead of hanging or corrupting data. It costs an extra small
            exchange per collective: turn it off when timing collectives.
        num_threads: the threads torch uses for one operation in each rank
            (``torch.get_num_threads()`` there). By default, ``OMP_NUM_THREADS`` if it is set
            when ``launch`` is called, else this machine's cores divided among the ranks.

    Returns:
        A list with one entry per rank: what ``fn`` returned there. Tensors come back on the
        CPU, detached, holding only their own elements (a slice of a large tensor comes back as
        the slice alone). Under ``torchrun``, ``fn`` runs once, on this process's rank in the
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
    if not callable(fn):
        raise TypeError(
            "launch's first argument must be the function each rank runs, called as "
            f"fn(rank, world_size, ...); got {_describe(fn)}."
        )
    if under_torchrun():
        return run_in_torchrun_rank(
            fn, world_size, args, kwargs, resolve_backend(backend, local_world_size())
        )
    options = {"backend": backend, "timeout": timeout, "check_collectives": check_collectives}
    _check_arguments(fn, world_size, args, kwargs, {**options, "num_threads": num_threads})
    world_size = operator.index(world_size)
    if not hasattr(os, "fork"):
        raise RuntimeError(
            "launch starts ranks by forking, which Windows does not have. Use WSL2, or a "
            "Colab or Kaggle notebook, or run under torchrun."
        )
    threads = threads_per_rank(num_threads, world_size)
    spec = LaunchSpec(
        world_size=world_size,
        backend=resolve_backend(backend, world_size),
        # Torch's own collective timeout stays longer than ours, so that at our deadline the
        # ranks are still where they got stuck and can say so.
        collective_timeout_s=float(timeout) + 30.0,
        check_collectives=bool(check_collectives),
        payload=pickle_function(fn, args, kwargs),
        cwd=os.getcwd(),
        sys_path=list(sys.path),
        env=_rank_environment(threads),
        num_threads=threads,
        warning_filters=_pickled_warning_filters(),
        guarded=guard.installed(),
    )
    make_room_for_pipes(world_size)
    try:
        outcome = Supervisor(spec, float(timeout)).run()
    except KeyboardInterrupt:
        outcome = None
    if outcome is None:  # raised here, not above, so that the launcher's frames are not shown
        raise KeyboardInterrupt("launch was interrupted: every rank was stopped.")
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


# -- arguments --------------------------------------------------------------------------------


def _check_arguments(fn: Any, world_size: Any, args: tuple, kwargs: dict, options: dict[str, Any]) -> None:
    __tracebackhide__ = True
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
    backend, timeout = options["backend"], options["timeout"]
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}; got {backend!r}.")
    # numbers.Real takes numpy's scalars too, which a notebook computes timeouts with.
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not 0 < timeout <= MAX_TIMEOUT_S:
        raise ValueError(f"timeout must be a positive number of seconds, at most a day; got {timeout!r}.")
    threads_per_rank(options["num_threads"], size)  # refuses a bad value, or a bad OMP_NUM_THREADS
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # some builtins have no signature; let the ranks find out
    name = _function_name(fn)
    try:
        signature.bind(0, size, *args, **kwargs)
    except TypeError as exc:
        extra = "".join(f", {a!r}" for a in args) + "".join(f", {k}={v!r}" for k, v in kwargs.items())
        clash = [option for option in OPTIONS if option in signature.parameters]
        hint = (
            f" ({', '.join(clash)} {'is' if len(clash) == 1 else 'are'} launch's own option: to pass "
            f"{clash[0]} to {name}, launch functools.partial({name}, {clash[0]}=...) instead)"
            if clash
            else ""
        )
        raise TypeError(
            f"launch calls {name}(rank, world_size{extra}) on every rank, but {name} cannot be "
            f"called that way: {exc}{hint}. Its first two parameters receive the rank and the "
            "world size."
        ) from None
    given = getattr(fn, "keywords", None) or {}  # a functools.partial's: already fn's own
    for option, default in OPTIONS.items():
        if option in signature.parameters and option not in given and options[option] != default:
            warnings.warn(
                f"{option}={options[option]!r} is an option of launch itself, so {name}'s own "
                f"parameter {option} keeps its default. To pass it to {name}, launch "
                f"functools.partial({name}, {option}=...) instead.",
                stacklevel=3,
            )


def _function_name(fn: Any) -> str:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return getattr(fn, "__name__", "fn")


def threads_per_rank(num_threads: Any, world_size: int) -> int:
    """Torch's threads in each rank: ``num_threads`` if given, else ``OMP_NUM_THREADS`` as set
    now, else the usable cores shared out among the ranks (so that they do not oversubscribe)."""
    __tracebackhide__ = True
    if num_threads is not None:
        if isinstance(num_threads, bool) or not isinstance(num_threads, numbers.Integral) or num_threads < 1:
            raise ValueError(
                f"num_threads must be a whole number of threads, 1 or more; got {num_threads!r}."
            )
        return int(num_threads)
    variable = os.environ.get("OMP_NUM_THREADS", "").strip()
    if variable:
        first = variable.split(",")[0].strip()  # OpenMP's nested form: "4,2"
        if not first.isdigit() or int(first) < 1:
            raise ValueError(
                f"OMP_NUM_THREADS is {variable!r}, which is not a number of threads. Set it to a "
                "whole number such as '1', or remove it (del os.environ['OMP_NUM_THREADS'])."
            )
        return int(first)
    return max(1, _usable_cpus() // world_size)


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
    """The CPUs this process may use: those it may run on (fewer than the machine's in a job),
    and no more than a container's CPU quota (cgroup v2's cpu.max) allows."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    with contextlib.suppress(OSError, ValueError), open("/sys/fs/cgroup/cpu.max") as limit:
        quota, period = limit.read().split()
        if quota != "max":
            cpus = min(cpus, max(1, math.ceil(int(quota) / int(period))))
    return cpus


def _pickled_warning_filters() -> list[tuple[str, bytes]]:
    """The caller's warning filters, each pickled on its own with its category's module (a
    filter that will not pickle is left out)."""
    pickled = []
    for item in warnings.filters:
        with contextlib.suppress(Exception):
            pickled.append((item[2].__module__, cloudpickle.dumps(item)))
    return pickled


def make_room_for_pipes(world_size: int) -> None:
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


def _rank_environment(threads: int) -> dict[str, str]:
    # What a rank starts later (a program, a thread pool sized from the environment) sees the
    # thread count the rank runs with.
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    if "GLOO_SOCKET_IFNAME" not in env:
        # All ranks are on this machine: keep Gloo on the loopback interface, which always
        # exists, rather than whatever the host name resolves to.
        loopback = next((name for _, name in socket.if_nameindex() if name.startswith("lo")), None)
        if loopback:
            env["GLOO_SOCKET_IFNAME"] = loopback
    return env


# -- pickling the function --------------------------------------------------------------------


def _code_reduce(code: types.CodeType) -> tuple:
    """cloudpickle's reduction of a code object, with the code's own file name kept."""
    constructor, fields = cloudpickle.cloudpickle._code_reduce(code)
    fields = tuple(code.co_filename if isinstance(f, str) and f == "<dynamic-code>" else f for f in fields)
    return constructor, fields


class _Pickler(cloudpickle.Pickler):
    """cloudpickle, except that a function keeps the file name its code was compiled from.

    cloudpickle 3.1.3 replaces it with "<dynamic-code>" (so that payloads do not depend on where
    a function was defined); a rank's traceback and the hang report could then no longer say
    "Cell In[5], line 3" for a function defined in a notebook. cloudpickle has no option for
    this, so the code objects' reducer is wrapped here.
    """

    dispatch_table = collections.ChainMap({types.CodeType: _code_reduce}, cloudpickle.Pickler.dispatch_table)


def dumps(obj: Any) -> bytes:
    """``cloudpickle.dumps(obj)``, keeping the file names of functions' code (see `_Pickler`)."""
    if not hasattr(cloudpickle.cloudpickle, "_code_reduce"):  # a cloudpickle without it: its names
        return cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    with io.BytesIO() as file:
        _Pickler(file, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
        return file.getvalue()


def pickle_function(fn: Callable[..., Any], args: tuple, kwargs: dict) -> bytes:
    """Pickle ``(fn, args, kwargs)`` for the ranks, or say exactly what cannot be pickled."""
    __tracebackhide__ = True
    try:
        return dumps((fn, args, kwargs))
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
