"""The rules that turn where the ranks are into a diagnosis (pure functions, no processes)."""

from __future__ import annotations

import gc
import sys
import weakref

from launcher.hangs import RankStack, hang_report, never_finishing

C10D = "/site-packages/torch/distributed/distributed_c10d.py"
USER = "/tmp/ipykernel_1/cell.py"


def blocked(rank: int, op: str, line: int = 5, cpu_s: float = 1.0, **peers) -> RankStack:
    frames = [
        {"filename": USER, "lineno": line, "name": "step", "peers": {}},
        {"filename": C10D, "lineno": 100, "name": op, "peers": peers},
    ]
    return RankStack(rank, "running", frames, cpu_s)


def computing(rank: int) -> RankStack:
    return RankStack(rank, "running", [{"filename": USER, "lineno": 9, "name": "step", "peers": {}}], 1.0)


def test_a_recv_from_a_returned_rank_never_finishes() -> None:
    stacks = {1: blocked(1, "recv", src=0)}
    assert never_finishing(stacks, returned={0}, world_size=2) == {
        1: "waits in recv(src=0) for rank 0, which already returned"
    }


def test_a_recv_from_a_rank_still_computing_may_finish() -> None:
    assert never_finishing({1: blocked(1, "recv", src=0), 0: computing(0)}, set(), 2) == {}


def test_a_collective_some_ranks_skipped_never_finishes() -> None:
    stuck = never_finishing({0: blocked(0, "all_reduce", group=None)}, {1, 2}, 3)
    assert stuck == {0: "waits in all_reduce for ranks 1, 2, which already returned"}


def test_a_collective_on_a_subgroup_only_needs_its_members() -> None:
    stacks = {0: blocked(0, "all_reduce", group=[0, 1]), 1: computing(1)}
    assert never_finishing(stacks, returned={2, 3}, world_size=4) == {}


def test_a_circle_of_receives_never_finishes_but_a_matched_pair_may() -> None:
    circle = {r: blocked(r, "recv", src=(r - 1) % 3) for r in range(3)}
    assert set(never_finishing(circle, set(), 3)) == {0, 1, 2}
    assert "in a circle of ranks 0, 1, 2 that all recv" in never_finishing(circle, set(), 3)[0]
    matched = {0: blocked(0, "send", dst=1), 1: blocked(1, "recv", src=0)}
    assert never_finishing(matched, set(), 2) == {}


def test_waiting_for_a_stuck_rank_is_stuck_too() -> None:
    stacks = {1: blocked(1, "recv", src=0), 2: blocked(2, "recv", src=1)}
    stuck = never_finishing(stacks, returned={0}, world_size=3)
    assert stuck[2] == "waits in recv(src=1) for rank 1, stuck too"


def test_a_recv_from_any_source_is_stuck_only_once_every_sender_is_gone() -> None:
    any_source = {0: blocked(0, "recv", group=None)}  # dist.recv(t): no src
    assert never_finishing(any_source, returned={1}, world_size=3) == {}  # rank 2 may still send
    assert never_finishing(any_source, returned={1, 2}, world_size=3) == {
        0: "waits in recv for ranks 1, 2, which already returned"
    }
    mixed = {0: blocked(0, "recv", group=None), 2: blocked(2, "recv", src=1)}
    assert never_finishing(mixed, returned={1}, world_size=3)[0] == (
        "waits in recv for rank 1, which already returned, and rank 2, stuck too"
    )


def test_a_wait_on_an_async_request_is_not_judged() -> None:
    waiting = RankStack(1, "running", [{"filename": USER, "lineno": 7, "name": "step", "peers": {}}], 1.0)
    assert never_finishing({1: waiting}, returned={0}, world_size=2) == {}


def test_same_place_needs_the_same_lines_and_no_work_in_between() -> None:
    first = blocked(1, "recv", line=5, cpu_s=1.00, src=0)
    assert first.same_place(blocked(1, "recv", line=5, cpu_s=1.01, src=0))
    assert not first.same_place(blocked(1, "recv", line=6, cpu_s=1.01, src=0))  # moved on
    assert not first.same_place(blocked(1, "recv", line=5, cpu_s=1.50, src=0))  # was receiving


def test_the_report_names_different_collectives_and_the_timeout() -> None:
    stacks = {0: blocked(0, "all_reduce", group=None), 1: blocked(1, "broadcast", src=0, group=None)}
    report = hang_report(2, stacks, returned=[], silent=[], timeout=3)
    assert report.startswith("the ranks did not finish within timeout=3s")
    assert "rank 1 is waiting in broadcast(src=0):" in report
    assert "blocked in different collectives (all_reduce on rank 0, broadcast on rank 1)" in report
    assert "pass a larger timeout to launch (it was 3 seconds)" in report


def test_a_look_at_a_ranks_stack_keeps_none_of_its_variables_alive() -> None:
    """Reading a running frame's f_locals (before Python 3.13) stores its variables on the frame
    until the function returns: a look at a rank that is slow (its stack is read to judge whether
    it is stuck) kept alive what the rank then deleted, and a check counting live tensors failed a
    correct answer on a loaded machine."""
    from launcher.rank import _describe_stack

    class Thing:
        pass

    def work() -> bool:
        thing = Thing()
        alive = weakref.ref(thing)
        _describe_stack(sys._getframe())  # the launcher's look, while `thing` is alive
        del thing
        gc.collect()
        return alive() is None

    assert work()


def test_a_check_replaces_the_advice_to_pass_a_larger_timeout() -> None:
    """A student cannot give a check a longer timeout: the check says what its timeout means."""
    from autograder.checks.ranks import _for_a_check

    stacks = {0: blocked(0, "all_reduce", group=None), 1: blocked(1, "broadcast", src=0, group=None)}
    report = _for_a_check(hang_report(2, stacks, returned=[], silent=[], timeout=3), timeout=3)
    assert "larger timeout" not in report
    assert "rank 1 is waiting in broadcast(src=0):" in report  # the rest of the report is kept
    assert report.endswith("(keep each one and wait() on it).")
    assert "within the 3 seconds this check allows" in report
    deadlock = hang_report(2, stacks, returned=[], silent=[], timeout=None)
    assert _for_a_check(deadlock, timeout=3) == deadlock


def test_a_rank_with_other_threads_is_never_judged_stuck() -> None:
    """Its other thread may be the one that sends or receives what unblocks its main thread."""
    helper = [{"name": "receiver", "frames": [{"filename": USER, "lineno": 3, "name": "loop", "peers": {}}]}]
    circle = {r: blocked(r, "send", dst=1 - r) for r in range(2)}
    assert set(never_finishing(circle, set(), 2)) == {0, 1}
    circle[0].threads = helper
    assert never_finishing(circle, set(), 2) == {}
    report = hang_report(2, circle, returned=[], silent=[], timeout=5)
    assert "its thread 'receiver' is at:" in report
    assert "rank 0 has other threads running, so launch cannot tell" in report


def test_a_frame_without_a_line_number_is_shown_without_one() -> None:
    # Python gives no line number for a frame caught between instructions, as a rank's can be while
    # it imports on a busy machine; the hang report then names the file alone.
    from launcher.errors import format_frame

    frame = {"filename": "/somewhere/importing.py", "lineno": None, "name": "load"}
    assert format_frame(frame) == '  File "/somewhere/importing.py", in load\n'
