"""What a rank of an expert-parallel layer did, recorded as it happens, for notebook 09's checks.

- `Exchanges` wraps the ``exchange(tensor, output_splits, input_splits)`` function a layer is given
  and records every call: the rows it sent to each rank and received from each, their width and
  dtype, and its place among the rank's events.
- `expert_calls` hooks every expert of a layer and records the rows each one computed on.
- `CollectiveLog` records every c10d collective the dispatcher sees (a plain ``dist.*`` call or a
  functional one), with its name, the elements and dtype of each tensor, and its place.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..comm import _COLLECTIVE_NAMES

_events = itertools.count()


@dataclass
class Exchange:
    seq: int
    width: int  # the elements of one row (0 for a one-dimensional tensor)
    floating: bool
    input_splits: list[int]
    output_splits: list[int]
    received: int  # rows that came back


@dataclass
class Exchanges:
    """``Exchanges(exchange)`` is called like ``exchange`` and records each call in ``calls``."""

    exchange: Callable[..., torch.Tensor]
    calls: list[Exchange] = field(default_factory=list)

    def __call__(self, tensor: torch.Tensor, output_splits: Any, input_splits: Any) -> torch.Tensor:
        __tracebackhide__ = True
        ins = [int(n) for n in _as_list(input_splits)]
        outs = [int(n) for n in _as_list(output_splits)]
        seq = next(_events)  # before the call: the collectives it makes come after it
        result = waited(self.exchange(tensor, output_splits, input_splits))
        width = int(torch.Size(tensor.shape[1:]).numel()) if tensor.dim() > 1 else 0
        received = len(result) if isinstance(result, torch.Tensor) and result.dim() else -1
        self.calls.append(Exchange(seq, width, tensor.is_floating_point(), ins, outs, received))
        return result

    def summary(self) -> list[tuple]:
        return [(c.seq, c.width, c.floating, c.input_splits, c.output_splits, c.received) for c in self.calls]


def waited(result: Any) -> Any:
    """torch's functional collectives return an AsyncCollectiveTensor, a subclass that waits when
    used: wait for it here, so that what the layer and the checks see is a plain tensor."""
    wait = getattr(result, "wait", None)
    if isinstance(result, torch.Tensor) and type(result).__name__ == "AsyncCollectiveTensor" and wait:
        return wait()
    return result


def _as_list(splits: Any) -> list:
    if isinstance(splits, torch.Tensor):
        return splits.tolist()
    return list(splits)


def expert_calls(moe: torch.nn.Module) -> tuple[list, list]:
    """Hook every expert of ``moe``; returns (records, handles). Each record is (event number,
    expert index, a copy of the rows it computed on)."""
    records: list = []
    handles = []
    for index, expert in enumerate(moe.experts):

        def hook(module: Any, args: tuple, output: Any, index: int = index) -> None:
            rows = args[0] if args else None
            if isinstance(rows, torch.Tensor):
                records.append((next(_events), index, rows.detach().clone()))

        handles.append(expert.register_forward_hook(hook))
    return records, handles


@dataclass
class Collective:
    seq: int
    name: str
    numels: list[int]
    floating: bool


class CollectiveLog(TorchDispatchMode):
    """Use as ``with CollectiveLog() as log:`` in a rank; ``log.summary()`` lists the collectives."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[Collective] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        op = func.overloadpacket.__name__
        name = _COLLECTIVE_NAMES.get(op)
        result = func(*args, **(kwargs or {}))
        if name and func.namespace in ("c10d", "_c10d_functional"):
            tensors = _tensors(args) + _tensors(result)
            floating = any(t.is_floating_point() for t in tensors)
            self.calls.append(Collective(next(_events), name, [t.numel() for t in tensors], floating))
        return result

    def summary(self) -> list[tuple]:
        return [(c.seq, c.name, c.numels, c.floating) for c in self.calls]


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    return []
