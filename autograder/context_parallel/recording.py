"""What a rank did while a check watched: its messages (posted, and when each was waited on), the
collectives it called, and the matmuls it ran (their FLOPs, and the widest operand), in order.

Sends and receives are recorded on the ``ProcessGroup`` class, as `autograder.comm.CommLog` records
them, so that ``dist.isend``, ``dist.send`` and ``batch_isend_irecv`` are all seen; each returns a
handle that notes when it is waited on. Matmuls and collectives are seen by a dispatch mode.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

_COLLECTIVE_WORDS = ("gather", "scatter", "reduce", "all_to_all", "alltoall", "broadcast", "barrier")
_MATMULS = {"mm", "bmm", "addmm", "baddbmm", "addbmm", "dot", "mv"}


class _Handle:
    """Stands for a send's or a receive's Work, and notes when it is first waited on."""

    def __init__(self, work: Any, events: list, index: int) -> None:
        self._work, self._events, self._index, self._waited = work, events, index, False

    def wait(self, *args: Any, **kwargs: Any) -> Any:
        result = self._work.wait(*args, **kwargs)
        if not self._waited:
            self._waited = True
            self._events.append(("wait", self._index))
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._work, name)


class RankRecord(TorchDispatchMode):
    """``with RankRecord() as record:`` in a rank; then ``record.summary()``, plain data.

    ``events`` holds, in order: ``("post", index, "send" or "recv", peer, numel)``,
    ``("wait", index)``, ``("matmul", flops, widest)`` and ``("collective", name)``."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple] = []
        self._posts = 0

    def __enter__(self) -> RankRecord:
        group = dist.ProcessGroup
        self._saved = {name: vars(group)[name] for name in ("send", "recv")}
        originals = {name: getattr(group, name) for name in ("send", "recv")}
        group.send = self._recording("send", originals["send"])
        group.recv = self._recording("recv", originals["recv"])
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        for name, saved in self._saved.items():
            setattr(dist.ProcessGroup, name, saved)
        super().__exit__(*exc)

    def _recording(self, direction: str, original: Any) -> Any:
        events = self.events

        def record(group: Any, tensors: list[torch.Tensor], peer: int, *args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            index = self._posts
            self._posts += 1
            events.append(("post", index, direction, peer, sum(t.numel() for t in tensors)))
            return _Handle(original(group, tensors, peer, *args, **kwargs), events, index)

        return record

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        name = func.overloadpacket.__name__
        if func.namespace in ("c10d", "_c10d_functional") and any(w in name for w in _COLLECTIVE_WORDS):
            self.events.append(("collective", name))
        elif name in _MATMULS:
            self.events.append(("matmul", *_matmul_size(name, args)))
        elif name.startswith("_scaled_dot_product"):
            q, k = args[0], args[1]
            batch = q.numel() // (q.shape[-1] * q.shape[-2])
            flops = 4 * batch * q.shape[-2] * k.shape[-2] * q.shape[-1]
            self.events.append(("matmul", flops, max(q.shape[-2], k.shape[-2])))
        return func(*args, **(kwargs or {}))

    def summary(self) -> dict:
        return {"events": list(self.events)}


def _matmul_size(name: str, args: tuple) -> tuple[int, int]:
    """FLOPs (2 m k n a product) and the largest of m, k and n."""
    if name in ("addmm", "baddbmm", "addbmm"):
        args = args[1:]
    a, b = args[0], args[1]
    if name in ("dot", "mv"):
        return 2 * a.numel() * (b.shape[0] if name == "dot" else 1), max(a.shape)
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = a.numel() // (m * k)
    return 2 * batch * m * k * n, max(m, k, n)


def matmul_flops(events: list[tuple]) -> int:
    return sum(e[1] for e in events if e[0] == "matmul")


def widest(events: list[tuple]) -> int:
    return max((e[2] for e in events if e[0] == "matmul"), default=0)


def collectives(events: list[tuple]) -> list[str]:
    return [e[1] for e in events if e[0] == "collective"]


def messages(events: list[tuple], direction: str) -> list[tuple[int, int]]:
    """(peer, numel) of each send or receive, in the order they were posted."""
    return [(e[3], e[4]) for e in events if e[0] == "post" and e[2] == direction]


def computed_with_nothing_in_flight(events: list[tuple]) -> int:
    """How many matmuls ran while no receive was in flight although some were still to come: the
    count of blocks computed without a transfer overlapping them."""
    receives = {e[1] for e in events if e[0] == "post" and e[2] == "recv"}
    posted, waited, bad = set(), set(), 0
    for event in events:
        if event[0] == "post" and event[2] == "recv":
            posted.add(event[1])
        elif event[0] == "wait" and event[1] in receives:
            waited.add(event[1])
        elif event[0] == "matmul" and len(waited) < len(receives) and not posted - waited:
            bad += 1
    return bad
