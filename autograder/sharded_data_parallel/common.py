"""What the checks of notebook 07 share: watching what a rank keeps and what its collectives carry,
and comparing its parameters with the reference computed in the checking process."""

from __future__ import annotations

import gc
import time
from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode

from ..checks import allclose, fail, tensors_in

_type = type


# -- what a rank keeps: storages made while watching that are still alive ---------------------


class _Storages(TorchDispatchMode):
    """Notes the storage of every tensor an operation returns while it is active; `alive_bytes`
    then says how many bytes of those storages are still alive (a tensor that shares a storage,
    a ``Parameter`` wrapped around one, keeps it alive too)."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[StorageWeakRef, int, int]] = []
        self.foreign: set[int] = set()  # storages the caller made (parameters, gradients): not counted

    def hand_over(self, tensors: Sequence[torch.Tensor | None]) -> None:
        """These tensors are the caller's: views of them are not the rank's own state."""
        self.foreign = {t.untyped_storage()._cdata for t in tensors if t is not None}

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in tensors_in(out):
            if t.device.type != "meta" and t.untyped_storage()._cdata not in self.foreign:
                storage = t.untyped_storage()
                self.refs.append((StorageWeakRef(storage), storage.data_ptr(), storage.nbytes()))
        return out

    def alive_bytes(self, excluded: Sequence[torch.Tensor]) -> int:
        return sum(self.alive_sizes(excluded))

    def alive_sizes(self, excluded: Sequence[torch.Tensor]) -> list[int]:
        """The sizes in bytes of the storages still alive, largest first."""
        # Gloo's worker thread may still hold the last collective's tensors for a moment after the
        # collective returned: the least of a few readings, a little apart, is what the rank keeps.
        readings = []
        for _ in range(3):
            gc.collect()
            readings.append(self._alive_sizes_now(excluded))
            time.sleep(0.01)
        return min(readings, key=sum)

    def _alive_sizes_now(self, excluded: Sequence[torch.Tensor]) -> list[int]:
        skip = {t.untyped_storage().data_ptr() for t in excluded if t is not None}
        alive: dict[int, int] = {}
        for ref, pointer, nbytes in self.refs:
            if not ref.expired() and pointer not in skip and nbytes:
                alive[pointer] = max(alive.get(pointer, 0), nbytes)
        return sorted(alive.values(), reverse=True)


def _contributions(summary: dict) -> list[tuple[str, int]]:
    """Each collective, in order, with the elements this rank put into it: an all_gather's piece,
    a reduce_scatter's input, an all_reduce's tensor."""
    return [
        (name, contributed or sum(numels))
        for (name, numels), (_, contributed) in zip(summary["calls"], summary["contributed"], strict=True)
    ]


def _volumes(summary: dict) -> dict[str, int]:
    """Elements each kind of collective carried, counted as whole arrays: an all_gather's output
    (its piece times the world size), a reduce_scatter's input, an all_reduce's tensor."""
    world_size = dist.get_world_size()
    volumes: dict[str, int] = {}
    for name, contributed in _contributions(summary):
        size = contributed * world_size if name == "all_gather" else contributed
        volumes[name] = volumes.get(name, 0) + size
    return volumes


def _counts(summary: dict) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name, _ in summary["calls"]:
        counts[name] = counts.get(name, 0) + 1
    return counts


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (
        _type(a) is torch.Tensor
        and a.shape == b.shape
        and allclose(a.float(), b.float(), rtol=1e-4, atol=1e-6)
    )


def _params_like(what: str, params: Any, reference: list[torch.Tensor]) -> None:
    __tracebackhide__ = True
    if _type(params) is not list or len(params) != len(reference):
        fail(f"{what}: returned {params!r:.100}; expected a list of {len(reference)} tensors.")
    for i, (p, r) in enumerate(zip(params, reference, strict=True)):
        if _type(p) is not torch.Tensor or p.shape != r.shape:
            fail(f"{what}: parameter {i} is {p!r:.80}; expected a tensor of shape {tuple(r.shape)}.")


def _compare(what: str, params: list, reference: list, against: str, mistakes: dict[str, list]) -> None:
    __tracebackhide__ = True
    wrong = [i for i, (p, r) in enumerate(zip(params, reference, strict=True)) if not _close(p, r)]
    if not wrong:
        return
    i = wrong[0]
    message = (
        f"{what}: parameter {i} differs from {against} (largest difference "
        f"{(params[i].float() - reference[i]).abs().max().item():.3g})."
    )
    for mistake, alternative in mistakes.items():
        if all(_close(p, a) for p, a in zip(params, alternative, strict=True)):
            message += f" That is what you get if you {mistake}."
            break
    fail(message)


def expect_byte_counts(what: str, answer: Any, keys: Sequence[str]) -> None:
    """Fail unless ``answer`` is a dict of exactly ``keys``, each an int (a number of bytes)."""
    __tracebackhide__ = True
    if _type(answer) is not dict or set(answer) != set(keys):
        names = ", ".join(map(repr, keys))
        fail(f"{what} returned {answer!r:.120}; expected a dict with the keys {names}.")
    for key in keys:
        if _type(answer[key]) is not int:
            fail(f"{what}[{key!r}] is {answer[key]!r:.60}; expected a number of bytes, an int.")
