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
from ..comm import _COLLECTIVE_NAMES, _CONTRIBUTED_ARGUMENT


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


class SentBuckets(TorchDispatchMode):
    """While active, notes the input storages of every reduce_scatter, and, as each is issued, how
    many storages of earlier ones are still alive. One may be: a bucket whose asynchronous
    reduce_scatter was waited on just before, its handle not yet let go, or a buffer Gloo's worker
    holds a moment after sending it. More are buckets kept after they were sent."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[int, StorageWeakRef]] = []
        self.most_alive = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        op = func.overloadpacket.__name__
        if _COLLECTIVE_NAMES.get(op) == "reduce_scatter" and func.namespace in ("c10d", "_c10d_functional"):
            given = args[_CONTRIBUTED_ARGUMENT.get(op, 0)]
            storages = {t.untyped_storage().data_ptr(): t.untyped_storage() for t in tensors_in(given)}
            earlier = {pointer for pointer, ref in self.sent if not ref.expired() and pointer not in storages}
            self.most_alive = max(self.most_alive, len(earlier))
            self.sent += [(pointer, StorageWeakRef(storage)) for pointer, storage in storages.items()]
        return func(*args, **(kwargs or {}))


def gradients_loss(params: Sequence[torch.Tensor], grads: Sequence[torch.Tensor]) -> torch.Tensor:
    """A loss whose gradient with respect to ``params[i]`` is ``grads[i]``. Autograd runs the last
    made operations first, so the gradients become ready last parameter first, as a model's
    backward makes them."""
    loss = (params[0] * grads[0]).sum()
    for p, g in zip(params[1:], grads[1:], strict=True):
        loss = loss + (p * g).sum()
    return loss
