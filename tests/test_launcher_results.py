"""What ranks return: only the elements asked for, large tensors through shared memory, and
sending them back never mistaken for a hang."""

from __future__ import annotations

import glob
import os
import pickle
import tempfile
import time
from pathlib import Path

import pytest
import torch

from launcher import LaunchError, LaunchHang, launch, supervise, wire


def _our_launch_folders() -> list[str]:
    """This process's launch folders, in shared memory and in the temporary directory."""
    pattern = f"launch-{os.getpid()}-*"
    return glob.glob(os.path.join("/dev/shm", pattern)) + glob.glob(
        os.path.join(tempfile.gettempdir(), pattern)
    )


def _slices_of_a_large_tensor(rank: int, world_size: int, clone: bool) -> tuple[torch.Tensor, torch.Tensor]:
    big = torch.zeros(25_000_000)  # 100 MB
    big[:10] = rank
    small, medium = big[:10], big[10:1_000_010]  # 40 bytes, and 4 MB (enough for shared memory)
    return (small.clone(), medium.clone()) if clone else (small, medium)


def test_a_returned_slice_comes_back_with_only_its_own_elements_as_fast_as_its_clone() -> None:
    launch(_slices_of_a_large_tensor, 2, False)  # warm
    timings = {}
    for clone in (True, False, True, False):
        start = time.perf_counter()
        results = launch(_slices_of_a_large_tensor, 2, clone)
        timings.setdefault(clone, []).append(time.perf_counter() - start)
    for rank, (small, medium) in enumerate(results):
        assert small.tolist() == [float(rank)] * 10
        assert small.untyped_storage().nbytes() == 10 * 4
        assert medium.untyped_storage().nbytes() == 1_000_000 * 4 and medium.sum().item() == 0
    # Before, each slice dragged its 100 MB storage through a pipe: seconds instead of a tenth.
    assert min(timings[False]) < 2 * min(timings[True]) + 0.2, timings


def _large_result(rank: int, world_size: int) -> dict[str, torch.Tensor]:
    values = torch.full((25_000_000,), float(rank))  # 100 MB
    return {"values": values, "every_other": values[::2], "weight": torch.nn.Parameter(values[:5].clone())}


def test_large_results_travel_through_shared_memory_and_leave_nothing(monkeypatch) -> None:
    mapped = []
    real = wire.tensor_from_file
    monkeypatch.setattr(wire, "tensor_from_file", lambda *args: mapped.append(args[1:]) or real(*args))
    results = launch(_large_result, 2)
    assert sorted(mapped) == [(torch.float32, (12_500_000,))] * 2 + [(torch.float32, (25_000_000,))] * 2
    for rank, result in enumerate(results):
        assert result["values"].shape == (25_000_000,) and result["values"].eq(rank).all()
        assert result["every_other"].is_contiguous() and result["every_other"].eq(rank).all()
        assert type(result["weight"]) is torch.Tensor and not result["weight"].requires_grad
    assert _our_launch_folders() == []


def test_tensors_that_fit_in_no_folder_travel_inside_the_pickle(tmp_path: Path) -> None:
    t = torch.arange(1_000_000, dtype=torch.float64)[::2]  # 4 MB, a strided view
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    for folders in ([], [str(blocked / "results")]):
        data = wire.pickle_result([t, t], folders)
        assert len(data) > t.numel() * 8  # the elements are in the pickle itself
        first, second = pickle.loads(data)
        assert torch.equal(first, t) and first is second  # one tensor, twice
    spilled = tmp_path / "spill"
    spilled.mkdir()  # the launching process makes the folders; ranks only write into them
    data = wire.pickle_result(t, [str(blocked / "results"), str(spilled)])
    assert len(data) < 1000 and len(os.listdir(spilled)) == 1  # the second folder took it
    assert torch.equal(pickle.loads(data), t) and os.listdir(spilled) == []


class SlowToSend:
    """A result that takes seconds to pickle, as a very large one does."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __reduce__(self):
        time.sleep(self.seconds)
        return (int, (7,))


def test_sending_results_back_is_not_counted_in_the_timeout() -> None:
    started = time.perf_counter()
    assert launch(lambda rank, world_size: SlowToSend(2.5), 2, timeout=1) == [7, 7]
    assert time.perf_counter() - started > 2.5


def test_results_that_never_finish_sending_are_reported_as_such(monkeypatch) -> None:
    # A timeout of seconds, not less: it counts the ranks' start, which a loaded machine slows.
    monkeypatch.setattr(supervise, "SEND_WAIT_S", 1.0)
    with pytest.raises(LaunchHang) as info:
        launch(lambda rank, world_size: SlowToSend(60 if rank else 0), 2, timeout=8)
    message = str(info.value)
    assert "every rank's function returned, but rank 1 had not finished preparing and sending" in message
    assert "within 8 s" in message and "Return less" in message


def _a_broadcast_view(rank: int, world_size: int) -> torch.Tensor:
    return torch.zeros(1).expand(50_000_000)  # 200 MB of elements, 4 bytes of storage


def test_an_expanded_tensor_comes_back_as_its_small_storage() -> None:
    started = time.perf_counter()
    (view,) = launch(_a_broadcast_view, 1)
    assert (
        time.perf_counter() - started < 2
        and view.shape == (50_000_000,)
        and view.untyped_storage().nbytes() == 4
    )


def _odd_results(rank: int, world_size: int) -> dict[str, torch.Tensor]:
    return {
        "uint16": torch.arange(5).to(torch.uint16),
        "float8": torch.ones(3).to(torch.float8_e4m3fn),
        "bool": torch.tensor([True, False]),
        "complex_conj": torch.tensor([1 + 2j]).conj(),
        "empty": torch.zeros(0, 3),
        "scalar": torch.tensor(7.5),
        "large_uint16": torch.arange(1 << 20, dtype=torch.int32).to(torch.uint16),
    }


def test_tensors_of_every_dtype_come_back() -> None:
    (result,) = launch(_odd_results, 1)
    assert result["uint16"].dtype == torch.uint16 and result["uint16"].tolist() == list(range(5))
    assert result["float8"].dtype == torch.float8_e4m3fn and result["float8"].float().tolist() == [1.0] * 3
    assert result["bool"].tolist() == [True, False]
    assert result["complex_conj"].tolist() == [1 - 2j]
    assert result["empty"].shape == (0, 3) and result["scalar"].item() == 7.5
    assert result["large_uint16"][-1].item() == (1 << 20) - 1 - 65536 * 15


def test_a_large_result_is_an_ordinary_tensor_that_can_be_sent_on_and_changed() -> None:
    import io
    from multiprocessing.reduction import ForkingPickler

    (values,) = launch(lambda rank, world_size: torch.full((1 << 20,), 2.0), 1)
    assert not values.is_shared()
    ForkingPickler(io.BytesIO()).dump(values)  # what torch.multiprocessing does to send it on
    values.add_(1)  # writable, and private to this process
    assert values[0].item() == 3.0


def _dies_while_sending(rank: int, world_size: int):
    class Fatal:
        def __reduce__(self):
            os._exit(3)

    return Fatal()


def test_a_rank_that_dies_while_sending_its_result_says_so() -> None:
    with pytest.raises(LaunchError, match="rank 0 of 1 exited with code 3 while sending its result back"):
        launch(_dies_while_sending, 1)
