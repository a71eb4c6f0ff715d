"""The course's GPU paths, where there is a CUDA GPU (skipped elsewhere, as on the machine the
suite is usually run on): `launch` over NCCL, `get_device`, and a grading sandbox that hides
the GPUs from the kernel unless told to show them. The solution notebooks' GPU cells (01's copy
and matmul timings, 03's NCCL benchmark) run with `python tests/environments/run_solutions.py`
on such a machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from grading import sandbox
from launcher import get_device, launch

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU: run `pytest tests/test_gpu.py` on a GPU machine"
)


def all_reduce_on_my_device(rank: int, world_size: int) -> tuple[str, str, list[float]]:
    device = get_device()
    values = torch.full((4,), float(rank + 1), device=device)
    dist.all_reduce(values)
    return str(device), dist.get_backend(), values.cpu().tolist()


def test_nccl_runs_at_world_size_one() -> None:
    assert launch(all_reduce_on_my_device, 1, backend="nccl") == [("cuda:0", "nccl", [1.0] * 4)]


def test_auto_picks_nccl_when_every_rank_has_a_gpu() -> None:
    n = torch.cuda.device_count()
    total = float(n * (n + 1) // 2)
    expected = [(f"cuda:{rank}", "nccl", [total] * 4) for rank in range(n)]
    assert launch(all_reduce_on_my_device, n) == expected


def test_more_ranks_than_gpus_run_on_the_cpu_over_gloo() -> None:
    n = torch.cuda.device_count() + 1
    total = float(n * (n + 1) // 2)
    assert launch(all_reduce_on_my_device, n) == [("cpu", "gloo", [total] * 4)] * n


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
@pytest.mark.parametrize("gpus", [False, True])
def test_a_sandboxed_kernel_sees_the_gpus_only_when_shown_them(tmp_path: Path, gpus: bool) -> None:
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    probe = "import torch; print(torch.cuda.is_available(), torch.cuda.device_count())"
    command = sandbox.sandbox_command(
        "bwrap", [sys.executable, "-c", probe], str(runtime), [REPO], 0, 1 << 30, gpus=gpus
    )
    done = subprocess.run(
        command,
        env=sandbox.sandbox_environment(dict(os.environ), gpus=gpus),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    expected = ["True", str(torch.cuda.device_count())] if gpus else ["False", "0"]
    assert done.stdout.split() == expected, done.stdout + done.stderr
