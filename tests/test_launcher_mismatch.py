"""A send and its receive that disagree in size or dtype: Gloo aborts the receiving rank, and the
launcher's report says why, on which rank and at which line, instead of only "SIGABRT"."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from autograder.checks import CheckFailed, ranks
from launcher import LaunchError, launch


def ring_of_growing_messages(rank: int, world_size: int) -> None:
    """Rank r sends 4 + r elements to its right and receives 4 + r from its left: rank 0's left
    neighbour, the last rank, sends the most, more than rank 0's tensor holds."""
    right, left = (rank + 1) % world_size, (rank - 1) % world_size
    handle = dist.isend(torch.ones(4 + rank), dst=right)
    dist.recv(torch.empty(4 + rank), src=left)
    handle.wait()


def float64_into_float32(rank: int, world_size: int) -> None:
    """The last rank sends 3 float64 numbers; rank 0 receives them as float32, half the bytes."""
    last = world_size - 1
    if rank == last:
        dist.send(torch.ones(3, dtype=torch.float64), dst=0)
    elif rank == 0:
        dist.recv(torch.empty(3, dtype=torch.float32), src=last)


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize(
    ("fn", "received", "room"),
    [
        (ring_of_growing_messages, "message of {sent} bytes", "tensor of 16 bytes"),
        (float64_into_float32, "message of 24 bytes", "tensor of 12 bytes"),
    ],
    ids=["size", "dtype"],
)
def test_the_report_names_the_mismatch_the_rank_and_the_line(
    fn, received: str, room: str, world_size: int
) -> None:
    with pytest.raises(LaunchError) as caught:
        launch(fn, world_size, backend="gloo", timeout=20)
    report = str(caught.value)
    assert "rank 0 of" in report and "SIGABRT" in report, report
    assert "Gloo aborted on a size or dtype mismatch between a send and its receive" in report, report
    sent = 4 * (4 + world_size - 1)  # float32 elements the last rank sends in the ring
    assert f"rank 0 received a {received.format(sent=sent)} into a {room}" in report, report
    assert f"in {fn.__name__}" in report, report  # the line of the rank's own code
    assert not caught.value.exceptions  # the rank died: there is no exception to rebuild


def matched_ring(rank: int, world_size: int) -> float:
    right, left = (rank + 1) % world_size, (rank - 1) % world_size
    received = torch.empty(4)
    handle = dist.isend(torch.full((4,), float(rank)), dst=right)
    dist.recv(received, src=left)
    handle.wait()
    return received[0].item()


@pytest.mark.parametrize("world_size", [2, 3])
def test_a_ring_whose_messages_match_runs(world_size: int) -> None:
    assert launch(matched_ring, world_size, backend="gloo") == [
        (r - 1) % world_size for r in range(world_size)
    ]


@pytest.fixture
def runs(monkeypatch) -> list[bool]:
    """Each launch a check makes, by whether torch's collective check was on."""
    checked: list[bool] = []

    def counting_launch(*args, **kwargs):
        checked.append(kwargs["check_collectives"])
        return launch(*args, **kwargs)

    monkeypatch.setattr(ranks, "launch", counting_launch)
    return checked


def not_written_yet(rank: int, world_size: int) -> None:
    raise NotImplementedError("write this function")


def collectives_that_differ(rank: int, world_size: int) -> None:
    """Rank 0 sums 4 numbers, the others 6: Gloo refuses it, or the ranks wait forever."""
    dist.all_reduce(torch.ones(4 if rank == 0 else 6))


def test_a_check_runs_again_with_the_collective_check_only_if_a_mismatch_could_be_why(runs) -> None:
    with pytest.raises(CheckFailed, match="NotImplementedError: write this function"):
        ranks.run_ranks(not_written_yet, 2)
    assert runs == [False]  # a plain error of the rank's own: its report says everything

    runs.clear()
    with pytest.raises(CheckFailed) as caught:
        ranks.run_ranks(collectives_that_differ, 2, timeout=10)
    assert runs == [False, True]
    assert "ranks disagree" in str(caught.value), caught.value


def receives_first(rank: int, world_size: int) -> None:
    """Every rank receives from its left before it sends: a circle that never starts."""
    dist.recv(torch.empty(2), src=(rank - 1) % world_size)
    dist.send(torch.ones(2), dst=(rank + 1) % world_size)


def test_a_check_whose_ranks_wait_only_in_sends_and_receives_is_not_run_again(runs) -> None:
    with pytest.raises(CheckFailed, match="in a circle of ranks"):
        ranks.run_ranks(receives_first, 3, timeout=20)
    assert runs == [False]  # torch's collective check does not look at sends and receives
