"""Telling a hang from slow work: where the ranks are, which of them can never finish, and the
report a LaunchHang carries.

The launching process looks at the ranks now and then; each answers with the Python stacks of
its threads. A rank blocked in torch.distributed waits for particular ranks (`RankStack.waits_for`),
and from that `never_finishing` proves a deadlock where it can. It proves nothing about a rank
that has other threads running: one of them may be what unblocks it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import format_frame, is_torch_internal, ranks_label
from .wire import JOINING

POINT_TO_POINT = {"send", "recv", "isend", "irecv", "batch_isend_irecv"}
IDLE_CPU_S = 0.05  # CPU time a rank may use between two looks and still count as idle


@dataclass
class RankStack:
    """Where one rank was when it was asked: its Python stack, from the user's function in."""

    rank: int
    phase: str
    frames: list[dict[str, Any]] = field(default_factory=list)
    cpu_s: float = 0.0  # the rank process's CPU time when it answered
    threads: list[dict[str, Any]] = field(default_factory=list)  # its other threads: name, frames

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
        from any source, any one rank of its group. Empty if the rank is not in torch.distributed,
        or if it has other threads, which may be what unblocks it.
        """
        frame = self._torch_frame
        if frame is None or self.threads:
            return set(), True
        peers = frame["peers"]
        if frame["name"] in POINT_TO_POINT and ("src" in peers or "dst" in peers):
            return {peers.get("src", peers.get("dst"))}, True
        group = peers.get("group")
        others = (set(group) if group is not None else set(range(world_size))) - {self.rank}
        return others, frame["name"] not in POINT_TO_POINT

    def same_place(self, other: RankStack) -> bool:
        """True if both looks found the rank in the same call, having done no work in between."""
        where = [(f["filename"], f["lineno"]) for f in self.frames]
        return where == [(f["filename"], f["lineno"]) for f in other.frames] and (
            abs(self.cpu_s - other.cpu_s) < IDLE_CPU_S
        )

    def format(self) -> str:
        text = _format_frames(self.frames)
        for thread in self.threads:
            text += f"  and its thread {thread['name']!r} is at:\n" + (
                _format_frames(thread["frames"]) or "    (no Python frames of yours)\n"
            )
        return text


def _format_frames(frames: list[dict[str, Any]]) -> str:
    return "".join(format_frame(f) for f in frames if not is_torch_internal(f["filename"]))


def never_finishing(stacks: dict[int, RankStack], returned: set[int], world_size: int) -> dict[int, str]:
    """Ranks that, from one look at their stacks, can never finish; each with the reason why.

    A collective needs every rank of its group and a send or recv needs its peer. So a rank
    blocked in torch.distributed waits forever if it needs a rank that has returned, or a rank
    that is itself stuck, or if it is one of a circle of ranks that all receive (or all send)
    from the next. A recv from any source waits forever only once every possible sender has
    returned or is stuck. A rank blocked in ``wait()`` on an async request is not judged.
    """
    # A rank still joining the process group, once another rank's function has returned, is only
    # slow: that rank joined, and joining completes for every rank once all have begun it. (On a
    # loaded machine a rank starved of CPU looks idle, and would otherwise be judged stuck.)
    joining = {rank for rank, stack in stacks.items() if stack.phase == JOINING and returned}
    waits = {rank: stack.waits_for(world_size) for rank, stack in stacks.items() if rank not in joining}
    waits = {rank: (needs, needs_all) for rank, (needs, needs_all) in waits.items() if needs}
    stuck: dict[int, str] = {}

    def blocked_by(needs: set[int], needs_all: bool, gone: set[int]) -> list[int]:
        hit = needs & gone
        return sorted(hit) if (hit if needs_all else needs <= gone) else []

    def why(rank: int, blockers: list[int]) -> str:
        parts = []
        done = [b for b in blockers if b in returned]
        if done:
            parts.append(f"{ranks_label(done)}, which already returned")
        waiting = [b for b in blockers if b not in returned]
        if waiting:
            parts.append(f"{ranks_label(waiting)}, stuck too")
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


# The last paragraph of a timeout's report (a check, which sets its own timeout, replaces it).
SLOW_NOT_STUCK = "If the work is just slow rather than stuck, pass a larger timeout to launch"


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
    threaded = sorted(rank for rank, stack in stacks.items() if stack.threads)
    if threaded and not stuck:
        lines += [
            "",
            f"{ranks_label(threaded)} {'has' if len(threaded) == 1 else 'have'} other threads "
            "running, so launch cannot tell whether they wait for each other or are just slow.",
        ]
    advice = _hang_advice(stacks, stuck)
    if advice:
        lines += ["", advice]
    if timeout is not None:
        lines += ["", f"{SLOW_NOT_STUCK} (it was {timeout:g} seconds)."]
    return "\n".join(lines)


def _hang_advice(stacks: dict[int, RankStack], stuck: dict[int, str]) -> str:
    collectives = {rank: s.op for rank, s in stacks.items() if s.op and s.op not in POINT_TO_POINT}
    if len(set(collectives.values())) > 1:
        by_op: dict[str, list[int]] = {}
        for rank, op in sorted(collectives.items()):
            by_op.setdefault(op, []).append(rank)
        parts = ", ".join(f"{op} on {ranks_label(ranks)}" for op, ranks in by_op.items())
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
