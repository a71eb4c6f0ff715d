"""The errors `launch` raises, and the reports in them: which ranks failed, where, and why.

Tracebacks arrive from the ranks as `traceback.TracebackException` objects whose source lines
are looked up here, in the launching process, so that a function defined in a notebook cell
shows that cell's lines (a rank process has no copy of the notebook's cells).
"""

from __future__ import annotations

import re
import signal
import traceback
from dataclasses import dataclass, field
from typing import Any

from .forkserver import EXIT_INTERNAL
from .rank import RETURNED, RUNNING, SENDING

MAX_MESSAGE_CHARS = 400  # one rank's error message, as quoted in the summary lines


class RankException(Exception):
    """Stands in for an exception raised in a rank that could not be copied back as itself."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name


@dataclass
class RankFailure:
    """How one rank failed."""

    rank: int
    exception: BaseException | None = None
    """The rank's exception, rebuilt here (its original type), or None if the rank died."""
    traceback: str = ""
    """The rank's traceback, formatted, starting at the function given to launch."""
    exitcode: int | None = None
    """The process's exit code if it died without raising; negative: killed by that signal."""
    phase: str = RUNNING

    def describe(self) -> str:
        if self.exception is not None:
            if self.phase == SENDING:
                text = str(self.exception)
                if isinstance(self.exception, RankException):
                    text = text.split(": ", 1)[-1]
                return f"returned something that cannot be sent back: {text}"
            if self.phase == RETURNED:
                return f"returned, then raised {_one_line(self.exception)} while shutting down"
            what = f"raised {_one_line(self.exception)}"
            return what if self.phase == RUNNING else f"{what} while {self.phase}"
        when = "after returning" if self.phase == RETURNED else "before returning"
        if self.exitcode == EXIT_INTERNAL:
            return (
                f"failed inside the launcher itself (exit code {EXIT_INTERNAL}) {when}; "
                "its output, above, says why"
            )
        if self.exitcode is not None and self.exitcode < 0:
            return f"was killed by signal {_signal_name(-self.exitcode)} {when}"
        return f"exited with code {self.exitcode} {when}"


class LaunchError(RuntimeError):
    """One or more ranks failed. ``failures`` says which, with each rank's original exception."""

    def __init__(self, message: str, failures: list[RankFailure]) -> None:
        super().__init__(message)
        self.failures = failures

    @property
    def exceptions(self) -> dict[int, BaseException]:
        """Each failed rank's original exception, by rank (ranks that died are left out)."""
        return {f.rank: f.exception for f in self.failures if f.exception is not None}


class LaunchHang(LaunchError, TimeoutError):
    """The ranks are stuck: some can never finish, or they did not finish within the timeout.

    ``stacks`` holds where each unfinished rank was, as formatted text, by rank.
    """

    def __init__(self, message: str, failures: list[RankFailure], stacks: dict[int, str]) -> None:
        super().__init__(message, failures)
        self.stacks = stacks


# -- failures ---------------------------------------------------------------------------------


def failure_report(failures: list[RankFailure], world_size: int, stopped: list[int]) -> str:
    """The message of a LaunchError: one line per failed rank, then their tracebacks."""
    failures = sorted(failures, key=lambda f: f.rank)
    lines = [f"rank {f.rank} of {world_size} {f.describe()}" for f in failures]
    if stopped:
        lines.append(f"{_ranks_phrase(stopped)} stopped.")
    mismatch = _collective_mismatch(failures)
    if mismatch:
        lines += ["", mismatch]
    hint = _hint_for(failures)
    if hint:
        lines += ["", hint]
    for text, ranks in _group_identical(failures):
        lines += ["", f"--- {_ranks_label(ranks)} ---", text.rstrip()]
    return "\n".join(lines)


def secondary_failures(failures: list[RankFailure]) -> list[RankFailure]:
    """Errors that only say a peer went away: the consequence of another rank's failure."""
    lost_peer = (
        "Connection closed by peer",
        "Connection reset by peer",
        "pair closure",
        "failed to pass monitoredBarrier",  # torch's collective check, when a peer died
    )
    return [f for f in failures if f.exception is not None and any(s in str(f.exception) for s in lost_peer)]


def _group_identical(failures: list[RankFailure]) -> list[tuple[str, list[int]]]:
    groups: dict[str, list[int]] = {}
    for f in failures:
        if f.traceback:
            groups.setdefault(f.traceback, []).append(f.rank)
    return list(groups.items())


_FINGERPRINT = re.compile(
    r"Rank (\d+) is running collective: CollectiveFingerPrint\(SequenceNumber=(\d+),? ?OpType=(\w+)"
    r"(?:, TensorShape=\[([^\]]*)\])?(?:, TensorDtypes=(\w+))?"
)
_MISMATCH = "Detected mismatch between collectives"
# Torch's OpType names, as the torch.distributed functions students call.
_OP_NAMES = {
    "ALLREDUCE": "all_reduce",
    "ALLREDUCE_COALESCED": "all_reduce_coalesced",
    "ALLGATHER": "all_gather",
    "_ALLGATHER_BASE": "all_gather_into_tensor",
    "ALLGATHER_COALESCED": "all_gather_coalesced",
    "REDUCE_SCATTER": "reduce_scatter",
    "_REDUCE_SCATTER_BASE": "reduce_scatter_tensor",
    "ALLTOALL": "all_to_all",
    "ALLTOALL_BASE": "all_to_all_single",
}


def _collective_mismatch(failures: list[RankFailure]) -> str:
    """Torch's collective check names each rank's call; say it in one line per rank."""
    calls: dict[int, str] = {}
    for f in failures:
        for rank, seq, op, shape, dtype in _FINGERPRINT.findall(str(f.exception or "")):
            detail = f", shape [{shape}], {dtype}" if shape else ""
            calls.setdefault(
                int(rank), f"{_OP_NAMES.get(op, op.lower())} ({_ordinal(int(seq) + 1)} collective{detail})"
            )
    if len(set(calls.values())) < 2:
        return ""
    lines = ["Torch checked the collectives and found that the ranks disagree:"]
    lines += [f"  rank {rank} called {call}" for rank, call in sorted(calls.items())]
    lines.append("Every rank must call the same collectives, in the same order, with the same shapes.")
    return "\n".join(lines)


def _hint_for(failures: list[RankFailure]) -> str:
    text = " ".join(str(f.exception) for f in failures if f.exception is not None)
    if "trying to initialize the default process group twice" in text:
        return (
            "launch has already set up the process group for your function: remove the call to "
            "dist.init_process_group (and dist.destroy_process_group) from it."
        )
    if "Default process group has not been initialized" in text:
        return "Your function destroyed the process group before its last collective."
    return ""


# -- hangs ------------------------------------------------------------------------------------

_POINT_TO_POINT = {"send", "recv", "isend", "irecv", "batch_isend_irecv"}
IDLE_CPU_S = 0.05  # CPU time a rank may use between two looks and still count as idle


@dataclass
class RankStack:
    """Where one rank was when it was asked: its Python stack, from the user's function in."""

    rank: int
    phase: str
    frames: list[dict[str, Any]] = field(default_factory=list)
    cpu_s: float = 0.0  # the rank process's CPU time when it answered

    @property
    def _torch_frame(self) -> dict[str, Any] | None:
        for frame in reversed(self.frames):
            if frame["filename"].endswith("distributed_c10d.py"):
                return frame
        return None

    @property
    def op(self) -> str | None:
        """The torch.distributed function the rank is blocked in, e.g. ``recv``."""
        frame = self._torch_frame
        return frame["name"] if frame else None

    @property
    def call(self) -> str | None:
        """The same, with the ranks it names, e.g. ``recv(src=0)``."""
        frame = self._torch_frame
        if frame is None:
            return None
        args = ", ".join(f"{k}={v}" for k, v in frame["peers"].items() if k in ("src", "dst"))
        return f"{frame['name']}({args})" if args else frame["name"]

    def waits_for(self, world_size: int) -> tuple[set[int], bool]:
        """The ranks this rank needs to get unstuck, and whether it needs all of them.

        A collective needs every other rank of its group; a send or recv, its one peer; a recv
        from any source, any one rank of its group. Empty if the rank is not in torch.distributed.
        """
        frame = self._torch_frame
        if frame is None:
            return set(), True
        peers = frame["peers"]
        if frame["name"] in _POINT_TO_POINT and ("src" in peers or "dst" in peers):
            return {peers.get("src", peers.get("dst"))}, True
        group = peers.get("group")
        others = (set(group) if group is not None else set(range(world_size))) - {self.rank}
        return others, frame["name"] not in _POINT_TO_POINT

    def same_place(self, other: RankStack) -> bool:
        """True if both looks found the rank in the same call, having done no work in between."""
        where = [(f["filename"], f["lineno"]) for f in self.frames]
        return where == [(f["filename"], f["lineno"]) for f in other.frames] and (
            abs(self.cpu_s - other.cpu_s) < IDLE_CPU_S
        )

    def format(self) -> str:
        shown = [f for f in self.frames if not _is_torch_internal(f["filename"])]
        return "".join(_format_frame(f) for f in shown)


def never_finishing(stacks: dict[int, RankStack], returned: set[int], world_size: int) -> dict[int, str]:
    """Ranks that, from one look at their stacks, can never finish; each with the reason why.

    A collective needs every rank of its group and a send or recv needs its peer. So a rank
    blocked in torch.distributed waits forever if it needs a rank that has returned, or a rank
    that is itself stuck, or if it is one of a circle of ranks that all receive (or all send)
    from the next. A recv from any source waits forever only once every possible sender has
    returned or is stuck. A rank blocked in ``wait()`` on an async request is not judged.
    """
    waits = {rank: stack.waits_for(world_size) for rank, stack in stacks.items()}
    waits = {rank: (needs, needs_all) for rank, (needs, needs_all) in waits.items() if needs}
    stuck: dict[int, str] = {}

    def blocked_by(needs: set[int], needs_all: bool, gone: set[int]) -> list[int]:
        hit = needs & gone
        return sorted(hit) if (hit if needs_all else needs <= gone) else []

    def why(rank: int, blockers: list[int]) -> str:
        parts = []
        done = [b for b in blockers if b in returned]
        if done:
            parts.append(f"{_ranks_label(done)}, which already returned")
        waiting = [b for b in blockers if b not in returned]
        if waiting:
            parts.append(f"{_ranks_label(waiting)}, stuck too")
        return f"waits in {stacks[rank].call} for " + ", and ".join(parts)

    for rank, (needs, needs_all) in waits.items():
        gone = blocked_by(needs, needs_all, returned)
        if gone:
            stuck[rank] = why(rank, gone)
    for rank in waits:
        circle = _circle_from(rank, waits, stacks)
        if circle and rank not in stuck:
            ranks = ", ".join(map(str, sorted(circle)))
            stuck[rank] = (
                f"waits in {stacks[rank].call}, in a circle of ranks {ranks} that all {stacks[rank].op}"
            )
    changed = True
    while changed:
        changed = False
        for rank, (needs, needs_all) in waits.items():
            blockers = blocked_by(needs, needs_all, returned | set(stuck))
            if rank not in stuck and blockers:
                stuck[rank] = why(rank, blockers)
                changed = True
    return stuck


def _circle_from(
    rank: int, waits: dict[int, tuple[set[int], bool]], stacks: dict[int, RankStack]
) -> list[int]:
    """The circle of ranks that all send (or all recv) to the next, through ``rank``, if any."""
    op = stacks[rank].op
    if op not in ("send", "recv"):
        return []
    path = [rank]
    while True:
        needs, _ = waits.get(path[-1], (set(), True))
        if len(needs) != 1:
            return []
        (peer,) = needs
        if peer == rank:
            return path
        if peer in path or stacks.get(peer) is None or stacks[peer].op != op:
            return []
        path.append(peer)


def hang_report(
    world_size: int,
    stacks: dict[int, RankStack],
    returned: list[int],
    silent: list[int],
    timeout: float | None,
) -> str:
    """The message of a LaunchHang: where each rank is, and why it cannot finish.

    ``timeout`` is the timeout that expired, or None when the deadlock was found before it.
    """
    stuck = never_finishing(stacks, set(returned), world_size)
    if timeout is None:
        lines = ["the ranks are deadlocked: some can never finish."]
    else:
        lines = [f"the ranks did not finish within timeout={timeout:g}s: they look stuck."]
    lines += [f"  rank {rank} {reason}." for rank, reason in sorted(stuck.items())]
    lines.append("")
    for rank in range(world_size):
        if rank in returned:
            lines.append(f"rank {rank} returned and is waiting for the other ranks to finish.")
        elif rank in stacks:
            stack = stacks[rank]
            where = f"is waiting in {stack.call}" if stack.call else f"is {stack.phase}"
            lines.append(f"rank {rank} {where}:")
            lines.append(stack.format().rstrip() or "  (no Python frames of yours)")
        elif rank in silent:
            lines.append(f"rank {rank} did not say where it is (it may be busy in C code).")
    advice = _hang_advice(stacks, stuck)
    if advice:
        lines += ["", advice]
    if timeout is not None:
        lines += [
            "",
            "If the work is just slow rather than stuck, pass a larger timeout to launch "
            f"(it was {timeout:g} seconds).",
        ]
    return "\n".join(lines)


def _hang_advice(stacks: dict[int, RankStack], stuck: dict[int, str]) -> str:
    collectives = {rank: s.op for rank, s in stacks.items() if s.op and s.op not in _POINT_TO_POINT}
    if len(set(collectives.values())) > 1:
        by_op: dict[str, list[int]] = {}
        for rank, op in sorted(collectives.items()):
            by_op.setdefault(op, []).append(rank)
        parts = ", ".join(f"{op} on {_ranks_label(ranks)}" for op, ranks in by_op.items())
        return (
            f"The ranks are blocked in different collectives ({parts}). Every rank must call the "
            "same collectives in the same order; look for a branch on rank that skips or adds one."
        )
    if any(rank in collectives for rank in stuck):
        return (
            "A collective needs every rank of its group, and some ranks never call this one: "
            "look for a collective inside a branch on rank."
        )
    if any("in a circle" in reason for reason in stuck.values()):
        return (
            "When every rank of a circle first receives (or first sends and a send waits for its "
            "recv), nobody can go first. Let some ranks send first and others receive first, or "
            "use isend/irecv and wait on both."
        )
    if stuck:
        return "Every send needs a recv on its dst rank, and every recv a send on its src rank."
    return ""


# -- formatting helpers -----------------------------------------------------------------------


def format_traceback(tb_exc: Any) -> str:
    """Format a rank's traceback with this process's source lines and cell names.

    ``tb_exc`` is a TracebackException (or, if it could not be sent, its text). Frames inside
    torch.distributed's own Python wrappers are left out: the line of the user's code that
    called torch.distributed is what matters. Returns "" if no frame is left.
    """
    if isinstance(tb_exc, str):
        text = tb_exc
    else:
        tb_exc.stack = traceback.StackSummary.from_list(
            [frame for frame in tb_exc.stack if not _is_torch_distributed(frame.filename)]
        )
        if not tb_exc.stack:
            return ""
        text = "".join(tb_exc.format())
    text = re.sub(r'File "([^"]+)", line (\d+)', _cell_location, text)
    lines = text.splitlines()
    if _MISMATCH in lines[-1]:
        lines[-1] = lines[-1].split(_MISMATCH)[0] + _MISMATCH + " (summarised above)"
    elif len(lines[-1]) > MAX_MESSAGE_CHARS:
        lines[-1] = lines[-1][:MAX_MESSAGE_CHARS] + " ... (the full message is in LaunchError.failures)"
    return "\n".join(lines) + "\n"


def _format_frame(frame: dict[str, Any]) -> str:
    import linecache

    location = _cell_location_text(frame["filename"], frame["lineno"])
    line = linecache.getline(frame["filename"], frame["lineno"]).strip()
    return f"  {location}, in {frame['name']}\n" + (f"    {line}\n" if line else "")


def _cell_location(match: re.Match) -> str:
    return _cell_location_text(match.group(1), int(match.group(2)))


def _cell_location_text(filename: str, lineno: int) -> str:
    """``Cell In[5], line 3`` for a notebook cell (as IPython writes it), else ``File "...", line 3``."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
        label = shell.compile.format_code_name(filename) if shell is not None else None
    except Exception:  # noqa: BLE001 - IPython absent or a version without this method
        label = None
    if label:
        return f"{label[0]} {label[1]}, line {lineno}"
    return f'File "{filename}", line {lineno}'


def _is_torch_internal(filename: str) -> bool:
    return "/torch/" in filename.replace("\\", "/")


def _is_torch_distributed(filename: str) -> bool:
    return "/torch/distributed/" in filename.replace("\\", "/")


def _one_line(exc: BaseException) -> str:
    name = exc.type_name if isinstance(exc, RankException) else type(exc).__name__
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if _MISMATCH in message:
        message = "mismatched collectives (see below)"
    if isinstance(exc, RankException):
        message = message.split(": ", 1)[-1]
    if len(message) > 160:
        message = message[:160] + " ..."
    return f"{name}: {message}" if message else name


def _signal_name(number: int) -> str:
    try:
        sig = signal.Signals(number)
    except ValueError:
        return str(number)
    description = signal.strsignal(sig) or ""
    return f"{sig.name} ({description})" if description else sig.name


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _ranks_label(ranks: list[int]) -> str:
    ranks = sorted(ranks)
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))


def _ranks_phrase(ranks: list[int]) -> str:
    return _ranks_label(ranks) + (" was" if len(ranks) == 1 else " were")
