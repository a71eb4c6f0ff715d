"""A stand-in GPU: on a machine without one, which tensors would be on the GPU?

A check that runs code inside `StandInGpu` learns, for every tensor, whether it would be on a GPU
on a machine with one. A tensor asked for on a CUDA device is made on the CPU instead and
remembered (by its storage) as being on the GPU; so is a tensor moved there (``.to("cuda")``,
``.cuda()``), and what an operation makes from such tensors without naming another device. A
tensor made without a device is on the CPU, as it would be on a GPU machine. Collectives then run
on Gloo as usual, and the checks ask `StandInGpu.on_gpu` where each tensor they carried would be.

`gpu_rank` makes `launcher.get_device()` say ``cuda:<rank>`` inside a rank, as it does under NCCL,
and ``torch.cuda`` say that there is a GPU.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

import launcher.rank

_CPU = torch.device("cpu")
_tensor_type = torch.Tensor


def _device_kind(value: Any) -> str | None:
    """ "gpu" for a CUDA device, "cpu" for another device, None for a value that names no device."""
    if isinstance(value, torch.device):
        return "gpu" if value.type == "cuda" else "cpu"
    if isinstance(value, str) and value.split(":")[0] in ("cuda", "cpu", "meta"):
        return "gpu" if value.startswith("cuda") else "cpu"
    return None


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, _tensor_type):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(item)]
    return []


def _storage(tensor: torch.Tensor) -> int:
    try:
        return tensor.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # a tensor with no storage of its own
        return 0


class StandInGpu(TorchFunctionMode):
    """While active, CUDA tensors are CPU tensors that it remembers as being on the GPU."""

    def __init__(self) -> None:
        super().__init__()
        self._storages: set[int] = set()
        # Kept alive, so that no storage remembered here is freed and reused for a CPU tensor.
        self._kept: list[torch.Tensor] = []

    def on_gpu(self, tensor: torch.Tensor) -> bool:
        """Whether the tensor would be on the GPU (an empty tensor is wherever it is asked to be)."""
        return tensor.numel() == 0 or _storage(tensor) in self._storages

    def _remember(self, tensor: torch.Tensor) -> None:
        pointer = _storage(tensor)
        if pointer:
            self._storages.add(pointer)
            self._kept.append(tensor)

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = dict(kwargs or {})
        name = getattr(func, "__name__", "")
        asked = _device_kind(kwargs.get("device"))
        if asked == "gpu":
            kwargs["device"] = _CPU
        if name == "to":  # to(device), to(device, dtype), to(other_tensor), to(dtype)
            moved = list(args)
            for i, value in enumerate(args[1:], start=1):
                kind = _device_kind(value)
                if kind is None and isinstance(value, _tensor_type):
                    kind = "gpu" if self.on_gpu(value) else "cpu"
                elif kind is None and type(value) is int:  # an ordinal: a CUDA device
                    kind = "gpu"
                if kind == "gpu" and not isinstance(value, _tensor_type):
                    moved[i] = _CPU
                asked = kind or asked
            args = tuple(moved)
        inputs = _tensors((args, kwargs))
        if name == "cuda":
            asked = "gpu"
            result = args[0] if self.on_gpu(args[0]) else args[0].clone()
        else:
            result = func(*args, **kwargs)
        if name == "cpu":
            asked = "cpu"
        # What an operation makes lives where it was asked for, else where its inputs are; what it
        # returns of its inputs' own storage (a view, an in-place result) stays where that is.
        to_gpu = asked == "gpu" or (asked is None and any(self.on_gpu(t) for t in inputs))
        own = {_storage(t) for t in inputs}
        for out in _tensors(result):
            if _storage(out) not in own:
                if to_gpu:
                    self._remember(out)
            elif asked == "gpu" and not self.on_gpu(out):
                result = out.clone()  # a CPU tensor moved to the GPU is a copy there
                self._remember(result)
            elif asked == "cpu" and self.on_gpu(out) and out.numel():
                result = out.clone()  # and a GPU tensor moved to the CPU a copy here
        return result


@contextlib.contextmanager
def gpu_rank(rank: int, world_size: int, synchronize: Callable[[], None]) -> Iterator[StandInGpu]:
    """Inside a rank: `get_device()` says ``cuda:<rank>``, ``torch.cuda`` says there is a GPU (the
    rank's) and its ``synchronize`` calls ``synchronize``, and the stand-in GPU is active."""
    context = launcher.rank.current_context()
    patched = [
        (torch.cuda, "is_available", lambda: True),
        (torch.cuda, "device_count", lambda: world_size),
        (torch.cuda, "current_device", lambda: rank),
        (torch.cuda, "synchronize", lambda *args, **kwargs: synchronize()),
    ]
    saved = [(module, name, getattr(module, name)) for module, name, _ in patched]
    for module, name, value in patched:
        setattr(module, name, value)
    if context is not None:
        launcher.rank._context = dataclasses.replace(context, backend="nccl")
    try:
        with StandInGpu() as gpu:
            yield gpu
    finally:
        launcher.rank._context = context
        for module, name, value in saved:
            setattr(module, name, value)
