"""Recording the communication a rank issues, so that tests can check how a result was computed.

Collectives are counted by torch's own ``CommDebugMode``, and their sizes recorded by a small
dispatch mode beside it. Sends and receives never reach the dispatcher: ``dist.send`` and
friends call the process group's ``send`` and ``recv`` methods directly. So while it is active,
`CommLog` wraps those methods on the ``ProcessGroup`` class, which sees every send and receive
however it was called (``dist.send``, a name imported from ``torch.distributed``, or
``batch_isend_irecv``).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

import launcher

# CommDebugMode's module takes seconds to import, and the checks run in every rank of every
# launch: have the launcher's fork server import both once, so that ranks start with them.
# (This process imports CommDebugMode only if it uses CommLog itself.)
launcher.preload("torch.distributed.tensor.debug", "autograder.collectives")

# The c10d ops that collectives dispatch, as the torch.distributed functions that issue them.
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
    # torch's functional collectives (_c10d_functional), which DTensor uses too
    "all_reduce": "all_reduce",
    "all_reduce_": "all_reduce",
    "all_reduce_coalesced": "all_reduce",
    "all_gather_into_tensor": "all_gather",
    "all_gather_into_tensor_coalesced": "all_gather",
    "reduce_scatter_tensor": "reduce_scatter",
    "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "all_to_all_single": "all_to_all",
    "broadcast": "broadcast",
}

# Which argument of each op holds what this rank puts in (the others hold what it receives).
_CONTRIBUTED_ARGUMENT = {
    "allgather_": 1,
    "_allgather_base_": 1,
    "allgather_into_tensor_coalesced_": 1,
    "reduce_scatter_": 1,
    "_reduce_scatter_base_": 1,
    "reduce_scatter_tensor_coalesced_": 1,
    "gather_": 1,
    "scatter_": 1,
    "alltoall_": 1,
    "alltoall_base_": 1,
}


# One count for every event a check records in a rank (messages here, a pipeline stage's steps
# in pipeline_parallel), so that their order can be compared.
_events = itertools.count()


def event_number() -> int:
    """The next number of the rank's events: later events have larger numbers."""
    return next(_events)


@dataclass
class Message:
    """One send or receive: its direction, the other rank (None: any), its size, when it was
    posted, and (where asked for) a copy of what was sent."""

    op: str  # "send" or "recv"
    peer: int | None
    numel: int
    seq: int = field(default_factory=event_number)
    sent: torch.Tensor | None = None


@dataclass
class Collective:
    """One collective call, the number of elements of each tensor it was given, and how many of
    them this rank put in (for an all_gather its own piece; for a reduce_scatter its whole input)."""

    name: str
    numels: list[int]
    contributed: int = 0


@dataclass
class CommLog:
    """Use as ``with CommLog() as log:`` inside a rank; then read ``collectives``, ``calls`` and
    ``messages``. Peers are ranks in the process group the message used.

    ``CommLog(count_collectives=False)`` records only the messages. CommDebugMode, which counts
    the collectives, tracks modules with global forward hooks that raise IndexError in torch 2.13
    when a module runs several forwards before their backwards, as a pipeline stage does; checks
    of such code, which need only its sends and receives, leave it out."""

    collectives: dict[str, int] = field(default_factory=dict)  # name -> count, by CommDebugMode
    calls: list[Collective] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    count_collectives: bool = True
    keep_sent: bool = False  # keep a copy of each sent tensor, as it was when the send was posted

    def __enter__(self) -> CommLog:
        self._counting = None
        self._sizing = _CollectiveSizes(self.calls)  # every collective, with its sizes
        self._sizing.__enter__()
        if self.count_collectives:
            self._enter_collectives()
        group = dist.ProcessGroup
        names = ("send", "recv", "recv_anysource")
        collectives = [name for name in _GROUP_COLLECTIVES if name in vars(group)]
        self._originals = {name: getattr(group, name) for name in (*names, *collectives)}
        # What is put back: the class's own entries (getattr gives a function that, set back
        # on the class, no longer binds the group it is called on).
        self._saved = {name: vars(group)[name] for name in (*names, *collectives)}
        group.send = self._recording("send", self._originals["send"])
        group.recv = self._recording("recv", self._originals["recv"])
        group.recv_anysource = self._recording("recv", self._originals["recv_anysource"], any_source=True)
        # Every collective a group is asked for also reaches the dispatcher, where the checks
        # count it; one that does not was run with the dispatcher's modes turned off
        # (``_disable_current_modes``), out of their sight.
        self._asked = [0]
        for name in collectives:
            setattr(group, name, _counted(self._originals[name], self._asked))
        return self

    def _enter_collectives(self) -> None:
        try:
            from torch.distributed.tensor.debug import CommDebugMode
        except ImportError:  # torch before 2.5 kept it private
            from torch.distributed._tensor.debug import CommDebugMode

        self._counting = CommDebugMode()
        self._counting.__enter__()

    def __exit__(self, *exc: Any) -> None:
        for name, saved in self._saved.items():
            setattr(dist.ProcessGroup, name, saved)
        if self._counting is not None:
            self._counting.__exit__(*exc)
        self._sizing.__exit__(*exc)
        if self._counting is not None:
            for op, count in self._counting.get_comm_counts().items():
                name = _COLLECTIVE_NAMES.get(getattr(op, "__name__", str(op)).split(".")[-1], str(op))
                self.collectives[name] = self.collectives.get(name, 0) + count
        seen = self._sizing.seen_from_groups
        if exc[0] is None and self._asked[0] > seen:
            from .checks import fail

            fail(
                f"{self._asked[0] - seen} of the collectives this rank ran were hidden from the checks' "
                "counting (run with torch's dispatch modes turned off, as _disable_current_modes does): "
                "run every collective in the open."
            )

    def _recording(self, direction: str, original: Any, any_source: bool = False) -> Any:
        messages, keep = self.messages, self.keep_sent and direction == "send"

        def record(group: Any, tensors: list[torch.Tensor], *args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            peer = None if any_source else args[0]
            sent = tensors[0].detach().clone() if keep and len(tensors) == 1 else None
            messages.append(Message(direction, peer, sum(t.numel() for t in tensors), sent=sent))
            return original(group, tensors, *args, **kwargs)

        return record

    @property
    def sends(self) -> list[Message]:
        return [m for m in self.messages if m.op == "send"]

    @property
    def recvs(self) -> list[Message]:
        return [m for m in self.messages if m.op == "recv"]

    def summary(self) -> dict[str, Any]:
        """Plain data to return from a rank: collective counts and sizes, and the messages."""
        return {
            "collectives": dict(self.collectives),
            "calls": [(c.name, c.numels) for c in self.calls],
            "contributed": [(c.name, c.contributed) for c in self.calls],
            "sends": [(m.peer, m.numel) for m in self.sends],
            "recvs": [(m.peer, m.numel) for m in self.recvs],
            "messages": [(m.op, m.peer, m.numel, m.seq) for m in self.messages],
            "sent": [m.sent for m in self.sends],
        }


class _CollectiveSizes(TorchDispatchMode):
    """Records each c10d collective the dispatcher sees, with the sizes of its tensors."""

    def __init__(self, calls: list[Collective]) -> None:
        super().__init__()
        self.calls = calls
        self.seen_from_groups = 0  # the c10d ops a process group's methods dispatch

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        op = func.overloadpacket.__name__
        name = _COLLECTIVE_NAMES.get(op)
        if name and func.namespace in ("c10d", "_c10d_functional"):
            given = args[_CONTRIBUTED_ARGUMENT.get(op, 0)] if args else None
            self.calls.append(Collective(name, _numels(args), sum(_numels(given))))
            self.seen_from_groups += func.namespace == "c10d"
        return func(*args, **(kwargs or {}))


# A process group's methods that run a collective (each dispatches one c10d op the checks count).
_GROUP_COLLECTIVES = (
    "broadcast",
    "allreduce",
    "allreduce_coalesced",
    "reduce",
    "allgather",
    "allgather_coalesced",
    "allgather_into_tensor_coalesced",
    "_allgather_base",
    "gather",
    "scatter",
    "reduce_scatter",
    "_reduce_scatter_base",
    "reduce_scatter_tensor_coalesced",
    "alltoall_base",
    "alltoall",
    # (torch 2.13's names)
    "all_gather_single",
    "all_gather_single_coalesced",
    "reduce_scatter_single",
    "reduce_scatter_single_coalesced",
    "all_to_all_single",
)


def _counted(method: Any, asked: list[int]) -> Any:
    def counted(group: Any, *args: Any, **kwargs: Any) -> Any:
        asked[0] += 1
        return method(group, *args, **kwargs)

    return counted


def _numels(value: Any) -> list[int]:
    if isinstance(value, torch.Tensor):
        return [value.numel()]
    if isinstance(value, (list, tuple)):
        return [n for item in value for n in _numels(item)]
    return []


class _RecordedWork:
    """Stands for an all_reduce's handle, and notes when it is waited on.

    With ``deliver_on_wait``, the all_reduce runs on a copy of the tensors, and its result is
    copied into them only when the handle (or its future) is waited on: until then they hold
    this rank's own values. Code that reads or changes them before waiting (a race that real
    backends lose only now and then) then gets a wrong result every time.
    """

    def __init__(
        self, work: Any, tensors: list, results: list, events: list, waited: list[bool], index: int
    ) -> None:
        self._work, self._tensors, self._results = work, tensors, results
        self._events, self._waited, self._index = events, waited, index
        self._lock = threading.Lock()
        self._delivered = results is tensors

    def _deliver(self, done: bool = False) -> None:
        """Put the result in the caller's tensors, once the work is ``done`` (else wait for it
        first: never while holding the lock, which a callback of its future may be waiting for)."""
        if not self._delivered and not done:
            self._work.wait()
        with self._lock:
            if self._delivered:
                return
            with torch.no_grad():
                for tensor, result in zip(self._tensors, self._results, strict=True):
                    tensor.copy_(result)
            self._delivered = True

    def _note_wait(self) -> None:
        if not self._waited[self._index]:
            self._waited[self._index] = True
            self._events.append(("wait", self._index))

    def wait(self, *args: Any, **kwargs: Any) -> bool:
        self._note_wait()
        if self._delivered:
            return self._work.wait(*args, **kwargs)
        self._deliver()
        return True

    def get_future(self) -> _RecordedFuture:
        future = _RecordedFuture(self)
        future._follow(self._work.get_future(), lambda _: self._tensors)
        return future

    def __getattr__(self, name: str) -> Any:
        return getattr(self._work, name)


class _RecordedFuture(torch.futures.Future):
    """A handle's future, or one chained to it with ``then``: a real torch future (so that
    ``torch.futures.wait_all`` and DDP's communication hooks take it), done when the work is.
    Waiting on it notes the handle as waited on; its value, and the future a callback of
    ``then`` is given, show the result delivered."""

    def __init__(self, handle: _RecordedWork) -> None:
        super().__init__()
        self._handle = handle

    def _follow(self, source: Any, value: Any) -> None:
        def done(future: Any) -> None:
            try:
                self.set_result(value(future))
            except Exception as exc:  # noqa: BLE001 - passed on to whoever waits, as torch does
                self.set_exception(exc)

        torch._C.Future.then(source, done)  # the base class's: a _RecordedFuture's own adds a step

    def wait(self) -> Any:
        self._handle._note_wait()
        self._handle._deliver()
        return super().wait()

    def value(self) -> Any:
        self._handle._deliver()
        return super().value()

    def then(self, callback: Any) -> _RecordedFuture:
        chained = _RecordedFuture(self._handle)

        def run(_: Any) -> Any:
            self._handle._deliver(done=True)  # this future is done, so the work is
            return callback(self)

        chained._follow(self, run)
        return chained


@contextlib.contextmanager
def recording_waits(events: list | None = None, deliver_on_wait: bool = False) -> Iterator[list[bool]]:
    """While active, every all_reduce returns a handle that notes whether it was waited on.

    Wrapped on the ``ProcessGroup`` class, as `CommLog` wraps sends, so that the handle is noted
    however the all_reduce was called. (A blocking ``dist.all_reduce`` waits on it itself.)
    Waiting on its future, directly or through ``torch.futures.wait_all``, counts too.

    ``events``, if given, receives ``("issue", index, numel, dtype, storage)`` as each all_reduce
    starts (its elements, the dtype and the address of the memory of its first tensor), and
    ``("wait", index)`` when it is first waited on, in order with what else the check puts
    there. ``deliver_on_wait`` holds each result back until its handle is waited on (see
    `_RecordedWork`).
    """
    real, real_collect = dist.ProcessGroup.allreduce, torch._C._collect_all
    saved = vars(dist.ProcessGroup)["allreduce"]  # what is put back (see CommLog.__enter__)
    waited: list[bool] = []
    log = events if events is not None else []

    def allreduce(group: Any, tensors: Any, *args: Any, **kwargs: Any) -> Any:
        given = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
        results = [t.detach().clone() for t in given] if deliver_on_wait else given
        work = real(group, results[0] if isinstance(tensors, torch.Tensor) else results, *args, **kwargs)
        waited.append(False)
        index = len(waited) - 1
        first = given[0] if given else torch.empty(0)
        log.append(
            ("issue", index, sum(t.numel() for t in given), first.dtype, first.untyped_storage().data_ptr())
        )
        return _RecordedWork(work, given, results, log, waited, index)

    def collect_all(futures: Any) -> Any:
        for future in futures:
            if isinstance(future, _RecordedFuture):
                future.wait()
        return real_collect(futures)

    dist.ProcessGroup.allreduce = allreduce
    torch._C._collect_all = collect_all
    try:
        yield waited
    finally:
        dist.ProcessGroup.allreduce = saved
        torch._C._collect_all = real_collect
