"""What travels between the launching process, the fork server and the ranks, and how.

Both sides import this module, so the message framing, the exit codes and the names of a
rank's phases are defined once:

- a *frame* is a pickle preceded by its length (`frame`, `read_frame`, `Frames`);
- a rank's *result* is pickled with every tensor detached, on the CPU and holding only its own
  elements; large tensors do not travel through the pipe at all but through a file in shared
  memory (`pickle_result`, `tensor_from_file`);
- a rank's *exception* is pickled so that it comes back as its own type even when its class
  cannot be rebuilt the usual way (`pickle_exception`).
"""

from __future__ import annotations

import contextlib
import io
import itertools
import math
import os
import pickle
import selectors
import struct
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
_file_numbers = itertools.count()


def pickle_result(result: Any, folders: list[str]) -> bytes:
    """Pickle a rank's result for the launching process.

    Every tensor comes back detached, on the CPU, and with only its own elements (a slice of a
    large tensor does not drag the large tensor's storage along). Tensors of a megabyte or more
    are copied once, into a file in the first of ``folders`` that has room for them, which the
    launching process maps into memory instead of reading (`tensor_from_file`); ``folders``
    should be in shared memory (``/dev/shm``) where there is one.

    Why not torch.multiprocessing's own reductions: they hand storages over as file
    descriptors through a listener that authenticates with a key the launching process and
    the ranks do not share, and every storage rebuilt that way keeps a file descriptor open
    for as long as it lives, so a notebook that keeps many results runs out of them. A file
    mapped and then unlinked keeps nothing open, and a folder of the launch's own is removed
    with everything in it whatever happens to the ranks.
    """
    buffer = io.BytesIO()
    _ResultPickler(buffer, folders).dump(result)
    return buffer.getvalue()


class _ResultPickler(cloudpickle.Pickler):
    def __init__(self, file: io.BytesIO, folders: list[str]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.folders = folders

    def reducer_override(self, obj: Any) -> Any:
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
    if nbytes >= SHARED_MIN_BYTES:
        for folder in folders:
            path = _write_to_file(t, folder)
            if path is not None:
                return tensor_from_file, (path, t.dtype, tuple(t.shape))
    t = t.cpu()
    if t.storage_offset() or t.untyped_storage().nbytes() != nbytes or not t.is_contiguous():
        t = t.clone(memory_format=torch.contiguous_format)  # only its own elements travel
    return t.__reduce_ex__(pickle.HIGHEST_PROTOCOL)


def _write_to_file(t: torch.Tensor, folder: str) -> str | None:
    """Copy ``t`` into a new file in ``folder``; None if the folder has no room for it."""
    path = os.path.join(folder, f"tensor-{os.getpid()}-{next(_file_numbers)}")
    nbytes = t.numel() * t.element_size()
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            # Reserving the space first turns a full /dev/shm into an error here, rather than
            # a SIGBUS while the copy writes to pages that cannot be had.
            if hasattr(os, "posix_fallocate"):
                os.posix_fallocate(fd, 0, nbytes)
            else:
                os.ftruncate(fd, nbytes)
        finally:
            os.close(fd)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(path)
        return None
    target = torch.from_file(path, shared=True, size=t.numel(), dtype=t.dtype)
    target.view(t.shape).copy_(t)
    return path


def tensor_from_file(path: str, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    """Map a tensor written by `pickle_result` into this process's memory, and delete its file.

    The mapping outlives the file: the memory is freed when the tensor is."""
    t = torch.from_file(path, shared=True, size=math.prod(shape), dtype=dtype)
    os.unlink(path)
    return t.view(shape)


# -- exceptions -------------------------------------------------------------------------------


def pickle_exception(exc: BaseException) -> bytes | None:
    """cloudpickle of ``exc``, so that it comes back as its own type; None if it cannot be.

    An exception pickles as ``(type, args)`` and is rebuilt by calling ``type(*args)``, which
    fails for a class whose ``__init__`` takes other arguments than its message. Such an
    exception is rebuilt without calling ``__init__``: same type, same ``args``, same attributes.
    """
    for candidate in (exc, _Rebuilt(exc, with_attributes=True), _Rebuilt(exc, with_attributes=False)):
        with contextlib.suppress(Exception):
            data = cloudpickle.dumps(candidate)
            cloudpickle.loads(data)  # some pickle fine but cannot be rebuilt
            return data
    return None


class _Rebuilt:
    def __init__(self, exc: BaseException, with_attributes: bool) -> None:
        self.exc = exc
        self.attributes = dict(getattr(exc, "__dict__", {})) if with_attributes else {}

    def __reduce__(self) -> tuple:
        return rebuild_exception, (type(self.exc), self.exc.args, self.attributes)


def rebuild_exception(cls: type, args: tuple, attributes: dict[str, Any]) -> BaseException:
    exc = cls.__new__(cls, *args)
    exc.args = args
    with contextlib.suppress(AttributeError, TypeError):
        exc.__dict__.update(attributes)
    return exc
