"""Recording which process group each collective ran on, so that a check can tell a gradient
average over the data-parallel group from one over the whole world.

`CommLog` (autograder.comm) counts collectives but not their groups. A dispatch mode sees every
c10d collective, a plain ``dist.all_reduce`` as well as DTensor's and FSDP's functional ones; the
group is one of its arguments (a ``ProcessGroup``, or for the functional ones the group's name),
and the ranks of that group are what this records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

from ..comm import _COLLECTIVE_NAMES, _numels


@dataclass
class GroupCall:
    """One collective: its name (``all_reduce``, ``all_gather``, ...), the global ranks of the
    group it ran on, and the number of elements of each tensor it was given."""

    name: str
    group: tuple[int, ...]
    numels: list[int] = field(default_factory=list)


def _group_ranks(value: Any) -> tuple[int, ...] | None:
    """The global ranks of a process group given as a ProcessGroup, a boxed one, or its name."""
    try:
        if isinstance(value, str):
            group = dist.distributed_c10d._resolve_process_group(value)
        elif isinstance(value, dist.ProcessGroup):
            group = value
        elif isinstance(value, torch.ScriptObject):
            group = dist.ProcessGroup.unbox(value)
        else:
            return None
        return tuple(dist.get_process_group_ranks(group))
    except Exception:  # noqa: BLE001 - another argument (a ReduceOp, a tag): not a group
        return None


class GroupLog(TorchDispatchMode):
    """Use as ``with GroupLog() as log:`` inside a rank; ``log.calls`` lists the collectives."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[GroupCall] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        op = func.overloadpacket.__name__
        name = _COLLECTIVE_NAMES.get(op)
        if name and func.namespace in ("c10d", "_c10d_functional"):
            group = None
            for value in (*args, *(kwargs or {}).values()):
                group = _group_ranks(value)
                if group is not None:
                    break
            self.calls.append(GroupCall(name, group or (), _numels(args)))
        return func(*args, **(kwargs or {}))

    def summary(self) -> list[tuple[str, tuple[int, ...], list[int]]]:
        """Plain data to return from a rank."""
        return [(c.name, c.group, c.numels) for c in self.calls]
