"""Supervising one launch from the launching process: start the ranks, relay their output, watch
for hangs, stop them, and turn what they sent into results or an error.

What runs inside a rank is in `launcher.rank`; how the two talk, in `launcher.wire`.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pickle
import selectors
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

from .errors import (
    LaunchError,
    LaunchHang,
    RankException,
    RankFailure,
    failure_report,
    format_traceback,
    ranks_label,
    secondary_failures,
)
from .folders import LaunchFolders
from .forkserver import ForkServerError, get_server, retire
from .hangs import RankStack, hang_report, never_finishing
from .output import OutputPrinter
from .resources import remove_leaked
from .wire import (
    EXIT_ORPHANED,
    RETURNED,
    RUNNING,
    SENDING,
    Frames,
    LaunchSpec,
    RankPipes,
    load_exception,
    read_available,
    wait_readable,
)

FAILURE_GRACE_S = 0.3  # after a rank fails, how long the others get to report their own errors
FIRST_LOOK_S = 0.5  # first look at where the ranks are; then at doubling intervals
AFTER_RETURN_LOOK_S = 0.2  # look this soon after a rank returns while others have not
CONFIRM_LOOK_S = 0.5  # a deadlock seen in one look is confirmed by another this much later
ANSWER_WAIT_S = 1.0  # how long the ranks get to answer a look
SEND_WAIT_S = 60.0  # once every rank returned, how long sending the results back may take at least
RELEASE_WAIT_S = 10.0  # once every rank sent its result, how long they get to exit
STOP_WAIT_S = 2.0  # how long stopped ranks get to exit (five times that under NCCL)
OUTPUT_DRAIN_S = 0.5  # after every rank exited, how long to wait for output still in flight
ERROR_TAIL_BYTES = 16_384  # the end of each rank's stderr, kept to say why a rank that died did

_launch_lock = threading.Lock()
_launch_ids = itertools.count(1)


# -- one launch -------------------------------------------------------------------------------


class Supervisor:
    """One call of `launch`: start the ranks, relay their output, collect what they send.

    While the ranks run, it looks at where they are now and then (at 0.5 s, 1 s, 2 s, ... and
    soon after a rank returns early). Two looks half a second apart that show ranks which can never
    finish (`never_finishing`), in the same place and idle, end the launch with a LaunchHang
    long before the timeout. The timeout counts while some rank still runs its function:
    sending results back has a limit of its own (`SEND_WAIT_S`, or the timeout if longer).
    """

    def __init__(self, spec: LaunchSpec, timeout: float) -> None:
        self.spec = spec
        self.size = spec.world_size
        self.timeout = timeout
        self.id = next(_launch_ids)
        self.stop_wait = STOP_WAIT_S * (5 if spec.backend == "nccl" else 1)  # CUDA teardown is slow
        self.returning: set[int] = set()  # ranks whose function returned
        self.results: dict[int, bytes] = {}
        self.received = [0] * self.size  # bytes of messages from each rank
        self.failures: dict[int, RankFailure] = {}
        self.exit_codes: dict[int, int] = {}
        self.stopped: list[int] = []  # ranks still running when we stopped them
        self.stop_at: float | None = None  # when to stop the ranks still running
        self.stop_sent = False
        self.printer = OutputPrinter()
        self.error_tails = [b""] * self.size  # the last of what each rank wrote to stderr
        self.frames = [Frames() for _ in range(self.size)]
        self.looks_asked = [0] * self.size  # stack requests sent to each rank
        self.server: Any = None
        self.pipes: list[RankPipes] = []
        # Looking at where the ranks are:
        self.look: dict[int, RankStack] = {}  # answers to the look under way, or to the last one
        self.look_waiting: set[int] = set()  # ranks asked that have not answered yet
        self.look_ends_at = 0.0
        self.previous_look: dict[int, RankStack] = {}
        self.look_interval = FIRST_LOOK_S
        self.next_look_at = 0.0
        self.final_look = False  # the look taken as the timeout runs out
        self.deadline = 0.0  # when the timeout runs out (set when the ranks start)
        self.timed_out = False
        self.deadlocked = False
        self.send_deadline: float | None = None  # set once every rank's function returned
        self.send_stalled = False

    def run(self) -> list[Any] | BaseException:
        """Run the ranks to the end; return their results, or the error to raise."""
        __tracebackhide__ = True
        with _launch_lock:  # one launch at a time per process: the fork server serves one
            folders = None
            try:
                folders = LaunchFolders()
                self.spec.store_path = folders.store_path
                self.spec.result_folders = folders.result_folders
                self.spec.resource_log = folders.resource_log
                return self._run()
            finally:
                if folders is not None:
                    _clean_up(folders.remove)

    def _run(self) -> list[Any] | BaseException:
        try:
            for _ in range(self.size):
                self.pipes.append(RankPipes())
            try:
                self.server = get_server()
                self.server.start_ranks(self.id, pickle.dumps(self.spec), [p.rank_ends() for p in self.pipes])
            except BaseException:
                if self.server is not None:  # it may hold half a message, or ranks: stop it all
                    retire(self.server)
                raise
            finally:
                for p in self.pipes:
                    p.close_rank_ends()
            self._relay()
        except BaseException:
            self._abort()
            raise
        finally:
            # File descriptors first: nothing here may be skipped by a second interrupt, nor by
            # output that cannot be written.
            _clean_up(*(p.close for p in self.pipes), self._remove_leaked_resources, self.printer.flush)
        return self._outcome()  # before the folders go: large results are read from them

    # The main loop: everything the ranks send arrives here, in the calling thread, so their
    # output lands in the notebook cell that called launch.
    def _relay(self) -> None:
        selector = selectors.DefaultSelector()
        for rank, p in enumerate(self.pipes):
            selector.register(p.out_r, selectors.EVENT_READ, ("out", rank))
            selector.register(p.err_r, selectors.EVENT_READ, ("err", rank))
            selector.register(p.result_r, selectors.EVENT_READ, ("message", rank))
        selector.register(self.server.fileno(), selectors.EVENT_READ, ("server", None))
        open_pipes = 3 * self.size
        start = time.monotonic()
        self.deadline = start + self.timeout
        self.next_look_at = start + FIRST_LOOK_S
        end_at = None  # stop relaying then, even if a pipe is still open
        for notice in self.server.notices():
            self._on_notice(notice)
        try:
            while True:
                now = time.monotonic()
                all_exited = len(self.exit_codes) == self.size
                if all_exited and not open_pipes:
                    return
                if not self.stop_sent:
                    self._watch(now)
                if self.stop_at is not None and now >= self.stop_at and not self.stop_sent:
                    self._stop_ranks()
                    end_at = now + self.stop_wait
                if all_exited and end_at is None:
                    end_at = now + OUTPUT_DRAIN_S  # a program the rank started may hold a pipe open
                if end_at is not None and now >= end_at:
                    return
                wake = [self.stop_at, end_at]
                if not self.stop_sent:
                    wake += [
                        self.deadline,
                        self.send_deadline,
                        self.next_look_at,
                        self.look_ends_at if self.look_waiting else None,
                    ]
                wake = [t for t in wake if t is not None and t > now]
                for key, _ in selector.select(min(wake) - now if wake else None):
                    kind, rank = key.data
                    if kind == "server":
                        for notice in self.server.notices():  # raises if the server is gone
                            self._on_notice(notice)
                        continue
                    data = read_available(key.fd)
                    if data:
                        if kind == "message":
                            self.received[rank] += len(data)
                            for message in self.frames[rank].feed(data):
                                self._on_message(rank, *message)
                        else:
                            self.printer.feed(rank, kind, data)
                            if kind == "err":
                                self.error_tails[rank] = (self.error_tails[rank] + data)[-ERROR_TAIL_BYTES:]
                        continue
                    if data is None:  # nothing to read after all
                        continue
                    selector.unregister(key.fd)
                    open_pipes -= 1
        finally:
            selector.close()

    def _on_message(self, rank: int, kind: str, body: Any) -> None:
        if kind == "returning":
            self.returning.add(rank)
            self.next_look_at = min(self.next_look_at, time.monotonic() + AFTER_RETURN_LOOK_S)
        elif kind == "result":
            self.returning.add(rank)
            self.results[rank] = body
            if len(self.results) == self.size and not self.stop_sent:
                self._send_all(b"x")  # every rank returned: they may exit
                self._schedule_stop(RELEASE_WAIT_S)  # ...and must, soon
            else:  # one rank is done early: soon look at whether the others can still finish
                self.next_look_at = min(self.next_look_at, time.monotonic() + AFTER_RETURN_LOOK_S)
        elif kind == "error":
            if self.stop_sent and (self.timed_out or self.deadlocked):
                return  # a rank of a stopped hang that saw its peers vanish: a consequence, not a cause
            self.failures[rank] = RankFailure(
                rank=rank,
                exception=_unpickle_exception(body),
                traceback=_rank_traceback(body),
                phase=body["phase"],
                type_name=body["type_name"],
                message=body["message"],
            )
            self._schedule_stop(self._grace())
        elif kind == "stack" and rank in self.look_waiting and body["look"] == self.looks_asked[rank]:
            self.look[rank] = RankStack(rank, body["phase"], body["frames"], body["cpu_s"], body["threads"])
            self.look_waiting.discard(rank)
            if not self.look_waiting:
                self._finish_look()

    def _on_notice(self, notice: tuple) -> None:
        kind, launch_id, rank, code = notice
        if kind != "exited" or launch_id != self.id:
            return
        self.exit_codes[rank] = code
        self.look_waiting.discard(rank)
        if rank in self.failures or (rank in self.results and code == 0):
            return
        if self.stop_sent and (code in (-signal.SIGKILL, EXIT_ORPHANED) or self.timed_out or self.deadlocked):
            return  # we stopped it (or stopped a hang: how it died then is beside the point)
        # A rank died. Others may die the same way at the same moment: give them a moment to
        # say so (what the rest then report about lost connections is set aside as a consequence).
        phase = RETURNED if rank in self.results else SENDING if rank in self.returning else RUNNING
        self.failures[rank] = RankFailure(rank=rank, exitcode=code, phase=phase)
        self._schedule_stop(self._grace())

    def _grace(self) -> float:
        """How long the ranks get, after one failed, to report their own errors: none once every
        rank has failed or sent its result (nothing more can come)."""
        heard = set(self.failures) | set(self.results)
        return 0.0 if len(heard) == self.size else FAILURE_GRACE_S

    @property
    def send_deadline_s(self) -> float:
        return max(self.timeout, SEND_WAIT_S)

    def _schedule_stop(self, delay: float) -> None:
        when = time.monotonic() + delay
        self.stop_at = when if self.stop_at is None else min(self.stop_at, when)

    def _send_all(self, request: bytes) -> None:
        for rank, p in enumerate(self.pipes):
            if rank not in self.exit_codes and p.control_w >= 0:
                with contextlib.suppress(OSError):
                    os.write(p.control_w, request)

    # -- looking at where the ranks are ---------------------------------------------------

    def _watch(self, now: float) -> None:
        if self.look_waiting:
            if now >= self.look_ends_at:
                self._finish_look()
            return
        if self.stop_at is not None or len(self.results) == self.size:
            return
        if len(self.returning) == self.size:  # every function returned: only sending is left
            if self.send_deadline is None:
                self.send_deadline = now + self.send_deadline_s
            elif now >= self.send_deadline:
                self.send_stalled = True
                self._schedule_stop(0.0)
            return
        if self.final_look and now >= self.deadline:
            self.timed_out = True  # the ranks' answers to the final look are in self.look
            self._schedule_stop(0.0)
        elif not self.final_look and now >= self.deadline - ANSWER_WAIT_S:
            self.final_look = True  # ask now, so that the report is ready when time runs out
            self._start_look(now)
        elif now >= self.next_look_at:
            self._start_look(now)

    def _start_look(self, now: float) -> None:
        self.look = {}
        self.look_waiting = {
            r for r in range(self.size) if r not in self.returning and r not in self.exit_codes
        }
        self.look_ends_at = now + ANSWER_WAIT_S
        for rank in self.look_waiting:
            with contextlib.suppress(OSError):
                os.write(self.pipes[rank].control_w, b"s")
                self.looks_asked[rank] += 1
        if not self.look_waiting:
            self._finish_look()

    def _finish_look(self) -> None:
        now = time.monotonic()
        self.look_waiting = set()
        if self.final_look:
            return  # _watch declares the timeout at the deadline, unless the ranks finish first
        stuck = never_finishing(self.look, self.returning, self.size)
        seen_before = stuck and all(
            rank in self.previous_look and self.look[rank].same_place(self.previous_look[rank])
            for rank in stuck
        )
        if seen_before:
            self.deadlocked = True
            self._schedule_stop(0.0)
            return
        if stuck:  # confirm with a second look: a snapshot can catch a message in flight
            self.next_look_at = now + CONFIRM_LOOK_S
        else:
            self.look_interval *= 2
            self.next_look_at = now + self.look_interval
        self.previous_look = self.look

    # -- stopping -------------------------------------------------------------------------

    def _stop_ranks(self) -> None:
        """Kill every rank of this launch that is still running."""
        self.stop_sent = True
        self.stopped = [r for r in range(self.size) if r not in self.exit_codes and r not in self.failures]
        for p in self.pipes:
            p.close_control()
        if self.server.alive():
            try:
                self.server.kill(self.id)
            except BaseException:
                retire(self.server)  # the kill may be half sent: stopping the server stops the ranks
                raise

    def _abort(self) -> None:
        """Stop the ranks after an interrupt or an internal error, and wait until they are gone."""
        if self.server is None:
            return
        give_up_at = time.monotonic() + self.stop_wait
        while True:
            try:
                if not self.stop_sent:
                    self._stop_ranks()
                while len(self.exit_codes) < self.size and self._wait_for_exit(give_up_at):
                    pass
                return
            except KeyboardInterrupt:
                continue  # a second interrupt must not leave ranks behind
            except (OSError, ValueError, ForkServerError):
                return

    def _wait_for_exit(self, give_up_at: float) -> bool:
        """Wait for notices from the fork server; False once there is none to wait for."""
        remaining = give_up_at - time.monotonic()
        if remaining <= 0 or not self.server.alive():
            return False
        if not wait_readable(self.server.fileno(), remaining):
            return False
        for notice in self.server.notices():
            self._on_notice(notice)
        return True

    def _remove_leaked_resources(self) -> None:
        """Unlink the shared memory the ranks made and did not unlink, and say so, as Python does
        at the end of a script (`launcher.resources`)."""
        log, self.spec.resource_log = self.spec.resource_log, ""  # once, even if interrupted
        for message in remove_leaked(log) if log else []:
            warnings.warn(message, UserWarning, stacklevel=_levels_to_caller())

    def _outcome(self) -> list[Any] | BaseException:
        if self.failures:
            failures = [self.failures[rank] for rank in sorted(self.failures)]
            for f in failures:  # a rank that died says why only in what it printed last
                if not f.type_name:
                    f.last_errors = self.error_tails[f.rank].decode("utf-8", "replace")
            lost_peer = secondary_failures(failures)
            primary = [f for f in failures if f not in lost_peer] or failures
            stopped = sorted((set(self.stopped) | {f.rank for f in lost_peer}) - {f.rank for f in primary})
            return LaunchError(failure_report(primary, self.size, stopped), primary)
        if self.timed_out or self.deadlocked:
            returned = sorted(self.returning)
            silent = [r for r in range(self.size) if r not in self.look and r not in self.returning]
            timeout = self.timeout if self.timed_out else None
            message = hang_report(self.size, self.look, returned, silent, timeout)
            stacks = {r: s.format() for r, s in self.look.items()}
            blocked_in = {r: s.op for r, s in self.look.items() if s.op}
            return LaunchHang(message, [], stacks, returned, blocked_in)
        if self.send_stalled:
            waiting = [r for r in range(self.size) if r not in self.results]
            arrived = sum(self.received)
            return LaunchHang(
                f"every rank's function returned, but {ranks_label(waiting)} had not finished "
                f"preparing and sending its result within {self.send_deadline_s:g} s"
                + (f" ({arrived / 1e6:.1f} MB arrived)" if arrived else "")
                + ". Return less, or simpler things: tensors travel fast, but a result of millions "
                "of Python objects is slow to pickle. Or save large results to a file and return "
                "its name.",
                [],
                {},
            )
        try:
            return [pickle.loads(self.results[rank]) for rank in range(self.size)]
        except Exception as exc:  # noqa: BLE001
            return LaunchError(
                f"the ranks finished, but their results could not be unpickled here: "
                f"{type(exc).__name__}: {exc}",
                [],
            )


def _rank_traceback(report: dict[str, Any]) -> str:
    """The rank's traceback, formatted here if it can be rebuilt here (for a notebook's source
    lines), else as the rank formatted it."""
    if report["traceback"] is not None:
        with contextlib.suppress(Exception):
            return format_traceback(pickle.loads(report["traceback"]))
    return format_traceback(report["traceback_text"])


def _unpickle_exception(report: dict[str, Any]) -> BaseException:
    exception = load_exception(report["exception"], report["exception_rebuilt"])
    return exception if exception is not None else RankException(report["type_name"], report["message"])


def _levels_to_caller() -> int:
    """The ``stacklevel`` at which a warning points at the code that called `launch`."""
    package = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == package:
        frame, level = frame.f_back, level + 1
    return level


def _clean_up(*steps: Callable[[], None]) -> None:
    """Run every clean-up step to its end even if the kernel is interrupted again meanwhile (each
    step is safe to repeat), then pass the interrupt on."""
    interrupted = False
    for step in steps:
        while True:
            try:
                step()
                break
            except KeyboardInterrupt:
                interrupted = True
            except Exception:  # noqa: BLE001 - clean-up goes on (output that cannot be written, say)
                break
    if interrupted:
        raise KeyboardInterrupt
