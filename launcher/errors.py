"""The errors `launch` raises, and the reports in them: which ranks failed, where, and why.

Tracebacks arrive from the ranks as `traceback.TracebackException` objects whose source lines
are looked up here, in the launching process, so that a function defined in a notebook cell
shows that cell's lines (a rank process has no copy of the notebook's cells).
"""

from __future__ import annotations

import re
import signal
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .wire import EXIT_INTERNAL, RETURNED, RUNNING, SENDING

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
    type_name: str = ""
    """The exception's type, as the rank named it."""
    message: str = ""
    """The exception's message, as the rank wrote it. (Reports use these two rather than the
    rebuilt exception, whose ``str`` may only work inside the rank.)"""
    last_errors: str = ""
    """For a rank that died: the last of what it wrote to stderr (a library's last words)."""

    def describe(self) -> str:
        if self.type_name:
            if self.phase == SENDING:
                return f"returned something that cannot be sent back: {self.message}"
            if self.phase == RETURNED:
                return f"returned, then raised {self.one_line()} while shutting down"
            what = f"raised {self.one_line()}"
            return what if self.phase == RUNNING else f"{what} while {self.phase}"
        when = {RETURNED: "after returning", SENDING: "while sending its result back"}.get(
            self.phase, "before returning"
        )
        if self.phase == SENDING and self.exitcode in (-signal.SIGKILL, -signal.SIGBUS):
            when += " (out of memory? return less)"
        if self.exitcode == EXIT_INTERNAL:
            return (
                f"failed inside the launcher itself (exit code {EXIT_INTERNAL}) {when}; "
                "its output, above, says why"
            )
        if self.exitcode is not None and self.exitcode < 0:
            return f"was killed by signal {_signal_name(-self.exitcode)} {when}"
        return f"exited with code {self.exitcode} {when}"

    def one_line(self) -> str:
        """``Type: first line of the message``, shortened."""
        lines = self.message.strip().splitlines()
        message = lines[0] if lines else ""
        if _MISMATCH in message:
            message = "mismatched collectives (see below)"
        if len(message) > 160:
            message = message[:160] + " ..."
        return f"{self.type_name}: {message}" if message else self.type_name


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

    ``stacks`` holds where each unfinished rank was, as formatted text, by rank; ``returned``, the
    ranks whose function had returned; ``blocked_in``, the torch.distributed function each rank
    blocked in one was in (``all_reduce``), by rank.
    """

    def __init__(
        self,
        message: str,
        failures: list[RankFailure],
        stacks: dict[int, str],
        returned: Sequence[int] = (),
        blocked_in: Mapping[int, str] | None = None,
    ) -> None:
        super().__init__(message, failures)
        self.stacks = stacks
        self.returned = list(returned)
        self.blocked_in = dict(blocked_in or {})


# -- failures ---------------------------------------------------------------------------------


def failure_report(failures: list[RankFailure], world_size: int, stopped: list[int]) -> str:
    """The message of a LaunchError: one line per failed rank, then their tracebacks."""
    failures = sorted(failures, key=lambda f: f.rank)
    lines = [f"rank {f.rank} of {world_size} {f.describe()}" for f in failures]
    if stopped:
        lines.append(f"{_ranks_phrase(stopped)} stopped.")
    mismatch = _collective_mismatch(failures) or _gloo_size_mismatch(failures)
    if mismatch:
        lines += ["", mismatch]
    hint = _hint_for(failures)
    if hint:
        lines += ["", hint]
    for text, ranks in _group_identical(failures):
        lines += ["", f"--- {ranks_label(ranks)} ---", text.rstrip()]
    return "\n".join(lines)


def secondary_failures(failures: list[RankFailure]) -> list[RankFailure]:
    """Errors that only say a peer went away: the consequence of another rank's failure."""
    lost_peer = (
        "Connection closed by peer",
        "Connection reset by peer",
        "pair closure",
        "failed to pass monitoredBarrier",  # torch's collective check, when a peer died
    )
    return [f for f in failures if any(s in f.message for s in lost_peer)]


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
        for rank, seq, op, shape, dtype in _FINGERPRINT.findall(f.message):
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


# Gloo's check as a message arrives: more bytes came than the receiving tensor holds. It cannot
# raise from its own thread, so the process aborts (SIGABRT), and only its stderr says why.
_GLOO_TOO_LONG = re.compile(r"op\.preamble\.length <= op\.nbytes\. (\d+) vs (\d+)")
_FAULT_FRAME = re.compile(r'File "([^"]+)", line (\d+) in (\S+)')


def _gloo_size_mismatch(failures: list[RankFailure]) -> str:
    """Name the ranks Gloo aborted because a message did not fit its receive, and where they were."""
    lines = []
    for f in failures:
        found = _GLOO_TOO_LONG.search(f.last_errors)
        if found is None:
            continue
        sent, room = found.groups()
        where = _main_thread_frame(f.last_errors[found.end() :])
        lines.append(
            f"  rank {f.rank} received a message of {sent} bytes into a tensor of {room} bytes"
            + (f", at {where}" if where else "")
        )
    if not lines:
        return ""
    return "\n".join(
        [
            "Gloo aborted on a size or dtype mismatch between a send and its receive (or between the "
            "ranks' tensors in a collective):",
            *lines,
            "A recv's tensor must have the number of elements and the dtype of the tensor sent to it. (A "
            "tensor larger than the message is not caught, and is left partly unwritten: check both ends.)",
        ]
    )


def _main_thread_frame(dump: str) -> str:
    """The innermost frame outside torch, the launcher and threading in the stack that Python's
    faulthandler printed last (the thread that was running, or the main one)."""
    for frame in _FAULT_FRAME.finditer(dump.split("most recent call first")[-1]):
        filename, lineno, name = frame.groups()
        if (
            not is_torch_internal(filename)
            and "/launcher/" not in filename
            and "/threading.py" not in filename
        ):
            return f"{_cell_location_text(filename, int(lineno))}, in {name}"
    return ""


def _hint_for(failures: list[RankFailure]) -> str:
    text = " ".join(f.message for f in failures)
    if "trying to initialize the default process group twice" in text:
        return (
            "launch has already set up the process group for your function: remove the call to "
            "dist.init_process_group (and dist.destroy_process_group) from it."
        )
    if "Default process group has not been initialized" in text:
        return "Your function destroyed the process group before its last collective."
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


def format_frame(frame: dict[str, Any]) -> str:
    import linecache

    # A frame caught between instructions (a rank still importing, say) may have no line number.
    lineno = frame["lineno"]
    if not lineno:
        return f'  File "{frame["filename"]}", in {frame["name"]}\n'
    location = _cell_location_text(frame["filename"], lineno)
    line = linecache.getline(frame["filename"], lineno).strip()
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


def is_torch_internal(filename: str) -> bool:
    return "/torch/" in filename.replace("\\", "/")


def _is_torch_distributed(filename: str) -> bool:
    return "/torch/distributed/" in filename.replace("\\", "/")


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


def ranks_label(ranks: list[int]) -> str:
    ranks = sorted(ranks)
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))


def _ranks_phrase(ranks: list[int]) -> str:
    return ranks_label(ranks) + (" was" if len(ranks) == 1 else " were")
