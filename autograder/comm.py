"""Recording the communication a rank issues, so that tests can check how a result was computed.

Collectives are counted by torch's own ``CommDebugMode``. Sends and receives are not: they go
straight to the process group's C++ methods, below the dispatcher where ``CommDebugMode``
listens, so `CommLog` also wraps ``torch.distributed``'s send/recv functions while it is active
(calls made as ``dist.send(...)``; a name imported before with ``from torch.distributed import
send`` is not seen).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

import launcher

# CommDebugMode's module takes seconds to import, and the checks run in every rank of every
# launch: have the launcher's fork server import both once, so that ranks start with them.
# (This process imports CommDebugMode only if it uses CommLog itself.)
launcher.preload("torch.distributed.tensor.debug", "autograder.collectives")

# CommDebugMode's op names, as the torch.distributed functions that issue them.
_COLLECTIVE_NAMES = {
    "allreduce_": "all_reduce",
    "allreduce_coalesced_": "all_reduce",
    "broadcast_": "broadcast",
    "reduce_": "reduce",
    "allgather_": "all_gather",
    "_allgather_base_": "all_gather",
    "allgather_into_tensor_coalesced_": "all_gather",
    "reduce_scatter_": "reduce_scatter",
    "_reduce_scatter_base_": "reduce_scatter",
    "reduce_scatter_tensor_coalesced_": "reduce_scatter",
    "gather_": "gather",
    "scatter_": "scatter",
    "alltoall_": "all_to_all",
    "alltoall_base_": "all_to_all",
}
_POINT_TO_POINT = ("send", "recv", "isend", "irecv")


@dataclass
class Message:
    """One send or receive: its direction, the other rank, and how many elements and bytes."""

    op: str  # "send" or "recv"
    peer: int | None
    numel: int
    nbytes: int


@dataclass
class CommLog:
    """Use as ``with CommLog() as log:`` inside a rank; then read ``collectives`` and ``messages``."""

    collectives: dict[str, int] = field(default_factory=dict)
    messages: list[Message] = field(default_factory=list)

    def __enter__(self) -> CommLog:
        from torch.distributed.tensor.debug import CommDebugMode

        self._mode = CommDebugMode()
        self._mode.__enter__()
        self._originals = {name: getattr(dist, name) for name in (*_POINT_TO_POINT, "batch_isend_irecv")}
        for name in _POINT_TO_POINT:
            setattr(dist, name, _Recorder(self._originals[name], self.messages))
        dist.batch_isend_irecv = self._recording_batch(self._originals["batch_isend_irecv"])
        return self

    def __exit__(self, *exc: Any) -> None:
        for name, original in self._originals.items():
            setattr(dist, name, original)
        self._mode.__exit__(*exc)
        for op, count in self._mode.get_comm_counts().items():
            name = _COLLECTIVE_NAMES.get(getattr(op, "__name__", str(op)).split(".")[-1], str(op))
            self.collectives[name] = self.collectives.get(name, 0) + count

    def _recording_batch(self, original: Any) -> Any:
        def batch_isend_irecv(p2p_op_list: list[Any]) -> Any:
            __tracebackhide__ = True
            for p2p in p2p_op_list:
                if isinstance(p2p.op, _Recorder):
                    p2p.op = p2p.op.original  # torch checks `op is isend`
                direction = "send" if p2p.op is self._originals["isend"] else "recv"
                t = p2p.tensor
                self.messages.append(Message(direction, p2p.peer, t.numel(), t.numel() * t.element_size()))
            return original(p2p_op_list)

        return batch_isend_irecv

    @property
    def sends(self) -> list[Message]:
        return [m for m in self.messages if m.op == "send"]

    @property
    def recvs(self) -> list[Message]:
        return [m for m in self.messages if m.op == "recv"]

    def summary(self) -> dict[str, Any]:
        """Plain data to return from a rank: collective counts and per-message details."""
        return {
            "collectives": dict(self.collectives),
            "sends": [(m.peer, m.numel) for m in self.sends],
            "recvs": [(m.peer, m.numel) for m in self.recvs],
        }


class _Recorder:
    """Stands in for ``dist.send`` (or recv, isend, irecv): records each call, then makes it.

    It compares equal to the function it wraps, because ``P2POp`` checks that its op is one of
    torch's own ``isend`` and ``irecv``.
    """

    def __init__(self, original: Any, messages: list[Message]) -> None:
        self.original = original
        self.messages = messages
        self.direction = "send" if "send" in original.__name__ else "recv"
        self.__name__ = original.__name__

    def __call__(self, tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        key = "dst" if self.direction == "send" else "src"
        peer = kwargs.get(key, args[0] if args else kwargs.get(f"group_{key}"))
        self.messages.append(
            Message(self.direction, peer, tensor.numel(), tensor.numel() * tensor.element_size())
        )
        return self.original(tensor, *args, **kwargs)

    def __eq__(self, other: object) -> bool:
        return other is self or other is self.original

    def __hash__(self) -> int:
        return hash(self.original)
