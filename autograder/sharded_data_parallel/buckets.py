"""What the check of notebook 07's ZeRO-2 measures in a rank: a backward whose gradients are this
rank's own draw, and, while backward runs, the most bytes that tensors made during it held at
once (the gradients autograd makes, the buckets and shards the optimizer makes of them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode

from ..checks import tensors_in


class PeakBytes(TorchDispatchMode):
    """While active, notes the storage of every tensor an operation returns, and after each
    operation how many bytes of those storages are alive at once; ``peak`` is the most, ``when``
    the operation that reached it. Storages made before it was entered (the parameters, the
    optimizer's state) are not counted."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: dict[int, tuple[StorageWeakRef, int]] = {}
        self.peak, self.when = 0, ""

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        # A view, or what an in-place operation returns, shares an input's memory: nothing new.
        given = {
            t.untyped_storage().data_ptr() for t in tensors_in((args, kwargs)) if t.device.type != "meta"
        }
        for t in tensors_in(out):
            if t.device.type != "meta":
                storage = t.untyped_storage()
                if storage.nbytes() and storage.data_ptr() not in given:
                    self.refs[storage.data_ptr()] = (StorageWeakRef(storage), storage.nbytes())
        self.look(func.overloadpacket.__name__)
        return out

    def look(self, after: str) -> None:
        # A collective's buffer that Gloo's worker thread holds a moment longer counts: the checks'
        # bound leaves room for one bucket more than the optimizer needs.
        alive = self._alive()
        if alive > self.peak:
            self.peak, self.when = alive, after

    def _alive(self) -> int:
        dead = [pointer for pointer, (ref, _) in self.refs.items() if ref.expired()]
        for pointer in dead:
            del self.refs[pointer]
        return sum(nbytes for _, nbytes in self.refs.values())


def gradients_loss(params: Sequence[torch.Tensor], grads: Sequence[torch.Tensor]) -> torch.Tensor:
    """A loss whose gradient with respect to ``params[i]`` is ``grads[i]``. Autograd runs the last
    made operations first, so the gradients become ready last parameter first, as a model's
    backward makes them."""
    loss = (params[0] * grads[0]).sum()
    for p, g in zip(params[1:], grads[1:], strict=True):
        loss = loss + (p * g).sum()
    return loss
