"""What travels between the launching process, the fork server and the ranks, and how.

Both sides import this module, so the message framing, the exit codes and the names of a
rank's phases are defined once:

- a *frame* is a pickle preceded by its length (`frame`, `read_frame`, `Frames`);
- a rank's *result* is pickled with every tensor detached, on the CPU and holding only its own
  elements; large tensors do not travel through the pipe at all but through a file in shared
  memory (`pickle_result`, `tensor_from_file`);
- a rank's *exception* is pickled so that it comes back as its own type even when its class
  cannot be rebuilt the usual way (`pickle_exception`);
- each rank has four pipes to the launching process (`RankPipes`).
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import itertools
import math
import mmap
import os
import pickle
import selectors
import struct
from dataclasses import dataclass, field
from typing import Any

import cloudpickle
import torch

MESSAGE_HEADER = struct.Struct("!Q")

# How a rank process ends, as its exit code says.
EXIT_FAILED = 1  # fn raised; the rank waited to be stopped and then exited
EXIT_INTERNAL = 70  # a rank's bootstrap broke (a bug in the launcher)
EXIT_ORPHANED = 75  # the control pipe closed: the launching process stopped the launch or died

# What a rank is doing, as reports say it: "rank 2 is <phase>".
STARTING = "starting"
LOADING = "loading the function"
JOINING = "joining the process group"
RUNNING = "running your function"
SENDING = "sending back what your function returned"
RETURNED = "waiting for the other ranks to return"


# -- what a rank is told ----------------------------------------------------------------------


@dataclass
class LaunchSpec:
    """Everything a rank needs to know, sent once per launch through the fork server."""

    world_size: int
    backend: str  # "gloo" or "nccl"
    collective_timeout_s: float
    check_collectives: bool
    payload: bytes  # cloudpickle of (fn, args, kwargs)
    cwd: str
    sys_path: list[str]
    env: dict[str, str]
    num_threads: int  # torch's intra-op threads in each rank
    warning_filters: list[tuple[str, bytes]]  # the caller's warnings.filters: (category's module, pickle)
    guarded: tuple[str, ...] = ()  # the packages grading's guard watches in the ranks (`launcher.guard`)
    # Set when the launch starts, from its folders (`launcher.folders`):
    store_path: str = ""  # a torch.distributed.FileStore shared by the ranks of this launch
    result_folders: list[str] = field(default_factory=list)  # where large result tensors go (`pickle_result`)
    resource_log: str = ""  # where ranks note the shared memory they create (`launcher.resources`)


# -- framing ----------------------------------------------------------------------------------


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


class Frames:
    """Assembles framed messages from whatever a non-blocking pipe or socket has to give."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        self.buffer += data
        messages = []
        while len(self.buffer) >= MESSAGE_HEADER.size:
            (size,) = MESSAGE_HEADER.unpack_from(self.buffer)
            if len(self.buffer) < MESSAGE_HEADER.size + size:
                break
            body = bytes(self.buffer[MESSAGE_HEADER.size : MESSAGE_HEADER.size + size])
            del self.buffer[: MESSAGE_HEADER.size + size]
            messages.append(pickle.loads(body))
        return messages


def read_available(fd: int) -> bytes | None:
    """What a non-blocking pipe or socket has: data, b"" at end of file, or None if nothing yet."""
    try:
        return os.read(fd, 1 << 20)
    except BlockingIOError:
        return None


def wait_readable(fd: int, timeout: float | None) -> bool:
    """True once ``fd`` has something to read (or reached end of file), False on timeout."""
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        return bool(selector.select(timeout))


# -- results: tensors through shared memory ---------------------------------------------------

# Smaller tensors travel inside the pickle: a file costs more than copying them.
SHARED_MIN_BYTES = 1 << 20
# A folder takes a result file only if this much of its file system stays free afterwards: half
# of it, or 4 GiB if that is less, and never under 256 MiB. A small /dev/shm (64 MiB in a default
# Docker container) is left to NCCL and DataLoader workers, which need it.
RESERVE_MAX_BYTES = 4 << 30
RESERVE_MIN_BYTES = 256 << 20
_file_numbers = itertools.count()


def pickle_result(result: Any, folders: list[str]) -> bytes:
    """Pickle a rank's result for the launching process.

    Every tensor comes back detached, on the CPU, and with only its own elements (a slice of a
    large tensor does not drag the large tensor's storage along). Tensors of a megabyte or more
    are copied once, into a file in the first of ``folders`` that has room for them (shared
    memory, ``/dev/shm``, first), which the launching process maps instead of reading
    (`tensor_from_file`). Smaller ones travel inside the pickle as raw bytes.

    Why not torch.multiprocessing's own reductions: they hand storages over as file
    descriptors through a listener that authenticates with a key the launching process and the
    ranks do not share. The cost of this way is the same as theirs: each large tensor that comes
    back keeps one file descriptor open while it lives, and its memory counts against the
    folder's file system (``/dev/shm``, usually half of RAM) even after its file is gone.
    """
    buffer = io.BytesIO()
    _ResultPickler(buffer, folders).dump(result)
    return buffer.getvalue()


class _ResultPickler(cloudpickle.Pickler):
    def __init__(self, file: io.BytesIO, folders: list[str]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.folders = folders

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, torch.Tensor) and type(obj).__name__ == "DTensor":
            raise TypeError(
                "a DTensor is spread over all the ranks: return t.full_tensor() for the whole "
                "tensor, or t.to_local() for this rank's shard"
            )
        if type(obj) in (torch.Tensor, torch.nn.Parameter) and _is_plain_strided(obj):
            return _reduce_tensor(obj.detach(), self.folders)
        if isinstance(obj, torch.Tensor) and (obj.device.type != "cpu" or obj.requires_grad):
            # Other kinds of tensor (sparse, quantized, subclasses) pickle their own way.
            return obj.detach().cpu().__reduce_ex__(pickle.HIGHEST_PROTOCOL)
        return super().reducer_override(obj)


def _is_plain_strided(t: torch.Tensor) -> bool:
    return t.layout == torch.strided and not t.is_quantized and not t.is_nested and t.device.type != "meta"


def _reduce_tensor(t: torch.Tensor, folders: list[str]) -> Any:
    t = t.resolve_conj().resolve_neg()
    nbytes = t.numel() * t.element_size()
    if t.untyped_storage().nbytes() < nbytes:
        # Its elements overlap (an expand, say): its storage is smaller than the tensor, so
        # send the storage, as torch's own pickling does.
        return t.cpu().__reduce_ex__(pickle.HIGHEST_PROTOCOL)
    if nbytes >= SHARED_MIN_BYTES:
        for folder in folders:
            path = _write_to_file(t, folder)
            if path is not None:
                return tensor_from_file, (path, t.dtype, tuple(t.shape))
    data = t.cpu().contiguous()
    # Raw bytes work for every dtype (torch's pickling does not, for uint16 or float8 in 2.13).
    return tensor_from_bytes, (ctypes.string_at(data.data_ptr(), nbytes), t.dtype, tuple(t.shape))


def _write_to_file(t: torch.Tensor, folder: str) -> str | None:
    """Copy ``t`` into a new file in ``folder``; None if the folder is gone or has no room."""
    path = os.path.join(folder, f"tensor-{os.getpid()}-{next(_file_numbers)}")
    nbytes = t.numel() * t.element_size()
    try:
        disk = os.statvfs(folder)
        free, total = disk.f_bavail * disk.f_frsize, disk.f_blocks * disk.f_frsize
        if free - nbytes < max(min(total // 2, RESERVE_MAX_BYTES), RESERVE_MIN_BYTES):
            return None
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)  # the folder must exist
        try:
            # Reserving the space first turns a full file system into an error here, rather
            # than a SIGBUS while the copy writes to pages that cannot be had.
            if hasattr(os, "posix_fallocate"):
                os.posix_fallocate(fd, 0, nbytes)
            else:
                os.ftruncate(fd, nbytes)
        finally:
            os.close(fd)
        target = torch.from_file(path, shared=True, size=t.numel(), dtype=t.dtype)
        target.view(t.shape).copy_(t)
        del target
        return path
    except Exception:  # noqa: BLE001 - no room, no folder, a dtype that cannot be copied: use the pipe
        with contextlib.suppress(OSError):
            os.unlink(path)
        return None


def tensor_from_file(path: str, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    """Map a tensor written by `pickle_result` into this process's memory, and delete its file.

    The mapping is private (copy on write), so the tensor behaves as any other: writing to it
    changes nothing elsewhere, and torch.multiprocessing can send it on. It outlives the file;
    its memory is freed with the tensor."""
    nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    fd = os.open(path, os.O_RDONLY)
    try:
        mapping = mmap.mmap(fd, nbytes, access=mmap.ACCESS_COPY)
    finally:
        os.close(fd)
        os.unlink(path)
    return torch.frombuffer(mapping, dtype=torch.uint8).view(dtype).view(shape)


def tensor_from_bytes(data: bytes, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    """Rebuild a small tensor sent as raw bytes by `pickle_result`."""
    if not data:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).view(dtype).view(shape)


# -- exceptions -------------------------------------------------------------------------------


def pickle_exception(exc: BaseException, message: str) -> tuple[bytes | None, bytes | None]:
    """Two pickles of ``exc``, so that it comes back as its own type: as itself, and rebuilt.

    An exception pickles as ``(type, args)`` and comes back as ``type(*args)``, which fails for a
    class whose ``__init__`` takes other arguments than its message, or that only works inside a
    rank (it calls ``dist.get_rank()``). The second pickle rebuilds it without calling
    ``__init__``: same type, same ``args`` (or its message, if those cannot travel), same
    attributes where they can. Tensors in it come back as in a result (on the CPU). The
    launching process tries the first, then the second (`load_exception`).
    """
    plain = _dumps_if_loadable(exc)
    rebuilt = None
    for args, with_attributes in ((exc.args, True), (exc.args, False), ((message,), False)):
        rebuilt = _dumps_if_loadable(_Rebuilt(exc, args, with_attributes))
        if rebuilt is not None:
            break
    return plain, rebuilt


def load_exception(plain: bytes | None, rebuilt: bytes | None) -> BaseException | None:
    """The exception from `pickle_exception`'s pickles, or None if neither can be loaded here."""
    for data in (plain, rebuilt):
        if data is not None:
            with contextlib.suppress(BaseException):  # user code runs while unpickling
                exc = pickle.loads(data)
                if isinstance(exc, BaseException):
                    return exc
    return None


def _dumps_if_loadable(obj: Any) -> bytes | None:
    try:
        data = pickle_result(obj, [])
        pickle.loads(data)  # some pickle fine but cannot be rebuilt
        return data
    except BaseException:  # noqa: BLE001 - user code runs while pickling
        return None


class _Rebuilt:
    def __init__(self, exc: BaseException, args: tuple, with_attributes: bool) -> None:
        self.cls, self.args = type(exc), args
        self.attributes = dict(getattr(exc, "__dict__", {})) if with_attributes else {}

    def __reduce__(self) -> tuple:
        return rebuild_exception, (self.cls, self.args, self.attributes)


def rebuild_exception(cls: type, args: tuple, attributes: dict[str, Any]) -> BaseException:
    exc = cls.__new__(cls, *args)
    exc.args = args
    with contextlib.suppress(AttributeError, TypeError):
        exc.__dict__.update(attributes)
    return exc


# -- the pipes -------------------------------------------------------------------------------


class RankPipes:
    """The four pipes between the launching process and one rank: its output, its errors, its
    messages (results, errors, stacks), and the control pipe through which it is released to exit
    or asked where it is (see `launcher.rank`)."""

    def __init__(self) -> None:
        self.out_r, self.out_w = os.pipe()
        self.err_r, self.err_w = os.pipe()
        self.result_r, self.result_w = os.pipe()
        self.control_r, self.control_w = os.pipe()
        os.set_blocking(self.result_r, False)  # read whatever is there; frames are assembled

    def rank_ends(self) -> tuple[int, int, int, int]:
        return (self.out_w, self.err_w, self.result_w, self.control_r)

    def close_rank_ends(self) -> None:
        """Close the ends the fork server has passed on to the rank (once; safe to repeat)."""
        for name in ("out_w", "err_w", "result_w", "control_r"):
            self._close(name)

    def close_control(self) -> None:
        """Close our end of the control pipe, once: a rank whose server is gone exits on this."""
        self._close("control_w")

    def close(self) -> None:
        for name in ("control_w", "out_r", "err_r", "result_r", "out_w", "err_w", "result_w", "control_r"):
            self._close(name)

    def _close(self, name: str) -> None:
        fd = getattr(self, name)
        if fd >= 0:
            setattr(self, name, -1)
            _close_quietly(fd)


def _close_quietly(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)
