"""What a rank keeps for its backward pass: every storage an operation made during the forward pass
that is still alive when the forward pass has returned, and which of them autograd saved.

Inside a rank, `KeptAfterForward` watches the forward pass: a dispatch mode notes, by weak
reference, the storage of every tensor an operation returns (a collective's output buffer
included), and a pair of saved-tensor hooks notes what autograd saves for backward (the tensor's
own bytes and those of the storage it keeps alive, so that a view of a whole tensor does not pass
as a shard). Whatever is still alive afterwards is kept: by autograd, an attribute of ``ctx``, a
list, a closure or a checkpoint's inputs alike. Each kept storage's values come back to the
checking process, which tells whether a rank kept the other ranks' tokens (`gathered_kept`):
compared by value, a copy, a transpose or a view of the gathered tensor is found as well.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

_type = type
_isin_tolerance = 1e-5  # relative: the same arithmetic on the same numbers, maybe in another order
_FOUND = 0.5  # a storage holding half of another rank's values holds its tokens (chance gives ~0.3%)


class _NewStorages(TorchDispatchMode):
    """Notes the storage of every tensor an operation returns, by weak reference."""

    def __init__(self, seen: dict[int, tuple[weakref.ref, torch.dtype]]) -> None:
        super().__init__()
        self.seen = seen

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for tensor in tree_leaves(out):
            if _type(tensor) is torch.Tensor and tensor.device.type == "cpu":
                storage = tensor.untyped_storage()
                known = self.seen.get(storage.data_ptr())
                # an address freed earlier in the pass may be handed out again
                if storage.nbytes() and (known is None or known[0]() is None):
                    self.seen[storage.data_ptr()] = (weakref.ref(storage), tensor.dtype)
        return out


class KeptAfterForward:
    """A context for one forward pass; `kept` then lists what is still alive from it."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[weakref.ref, torch.dtype]] = {}
        self._saved: dict[int, int] = {}  # storage data_ptr -> bytes of the tensor autograd saved

    def __enter__(self) -> KeptAfterForward:
        def pack(tensor: torch.Tensor) -> torch.Tensor:
            if _type(tensor) is torch.Tensor:
                pointer = tensor.untyped_storage().data_ptr()
                needs = tensor.numel() * tensor.element_size()
                self._saved[pointer] = max(self._saved.get(pointer, 0), needs)
            return tensor

        self._hooks = torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor)
        self._hooks.__enter__()
        self._mode = _NewStorages(self._seen)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._mode.__exit__(*exc)
        self._hooks.__exit__(*exc)

    def kept(self, besides: Iterable[Any] = ()) -> list[dict]:
        """Each storage made during the forward pass and alive now, except those of ``besides``
        (the output, the inputs, the parameters): its bytes, its values as float32, and the bytes of
        the tensor autograd saved in it (None if autograd saved none: kept some other way)."""
        gc.collect()
        excluded = {
            t.untyped_storage().data_ptr()
            for t in besides
            if isinstance(t, torch.Tensor) and t.device.type == "cpu"
        }
        found = []
        for pointer, (ref, dtype) in self._seen.items():
            storage = ref()
            if storage is None or pointer in excluded or not dtype.is_floating_point:
                continue
            values = torch.empty(0, dtype=dtype).set_(storage).detach().float().clone()
            found.append({"bytes": storage.nbytes(), "values": values, "saved": self._saved.get(pointer)})
        return found


def holds(values: torch.Tensor, wanted: torch.Tensor) -> bool:
    """Whether ``values`` (a flat storage) holds at least half of ``wanted``'s numbers, in any order
    or layout, to within float rounding."""
    wanted = wanted.detach().float().flatten()
    if wanted.numel() == 0 or values.numel() == 0:
        return False
    ordered, _ = values.sort()
    at = torch.searchsorted(ordered, wanted).clamp(max=ordered.numel() - 1)
    nearest = torch.minimum((ordered[at] - wanted).abs(), (ordered[(at - 1).clamp(min=0)] - wanted).abs())
    matched = nearest <= _isin_tolerance * (1 + wanted.abs())
    return matched.float().mean().item() >= _FOUND


def gathered_kept(kept: list[dict], others: list[torch.Tensor]) -> dict | None:
    """The first kept storage that holds another rank's tokens (``others``: for each other rank, a
    tensor of its tokens as this rank could have received them), or None."""
    for storage in kept:
        if any(holds(storage["values"], tokens) for tokens in others):
            return storage
    return None
