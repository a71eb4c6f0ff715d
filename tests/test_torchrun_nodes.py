"""Notebook 08's DP x TP training function, unchanged, on two simulated nodes under torchrun: two
torchrun agents on this machine (``--nnodes 2``, a c10d rendezvous on localhost), 2 processes
each, must end with the parameters the launcher's own 4 ranks reach with the same function."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import torch
from course import REPO, grade_id, notebook_path, read, without_solution_markers

ASSIGNMENT = "08-combined-parallelism"
CELLS = ("setup", "mesh", "tp_mlp", "dp_tp")  # what train_dp_tp needs, in the notebook's order
AGENT_TIMEOUT_S = 90  # a start of 6 Python processes on 2 busy cores; it takes 10-30 s here

RUN = textwrap.dedent(
    """
    import sys

    dataset = torch.utils.data.TensorDataset(*make_data(8, seed=3))
    result = launch(train_dp_tp, 4, 2, 2, lambda: make_model(seed=4), dataset, 3, 0.1)
    if "TORCHELASTIC_RUN_ID" in os.environ:  # under torchrun: this rank's result
        torch.save(result, f"{sys.argv[1]}/torchrun-{dist.get_rank()}.pt")
    else:  # the launcher's ranks: every rank's result
        torch.save(result, f"{sys.argv[1]}/launcher.pt")
    """
)


def notebook_script() -> str:
    """The notebook's own cells that define train_dp_tp, then the run above."""
    cells = {grade_id(cell): cell.source for cell in read(notebook_path("solutions", ASSIGNMENT)).cells}
    return "\n\n".join(without_solution_markers(cells[name]) for name in CELLS) + "\n" + RUN


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return sock.getsockname()[1]


def environment() -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    }
    env.update(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    return env


def run_agents(script: Path, out: Path) -> list[subprocess.CompletedProcess]:
    """Both agents at once, each in its own process group, so that a hang kills all it started."""
    port = free_port()
    agents = []
    for node in range(2):
        command = [
            sys.executable, "-m", "torch.distributed.run",
            "--nnodes", "2", "--node-rank", str(node), "--nproc-per-node", "2",
            "--rdzv-backend", "c10d", "--rdzv-endpoint", f"localhost:{port}", "--rdzv-id", f"nodes-{port}",
            "--max-restarts", "0", str(script), str(out),
        ]  # fmt: skip
        agents.append(
            subprocess.Popen(
                command,
                cwd=out,
                env=environment(),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )  # fmt: skip
        )
    done = []
    try:
        for agent in agents:
            output, _ = agent.communicate(timeout=AGENT_TIMEOUT_S)
            done.append(subprocess.CompletedProcess(agent.args, agent.returncode, output))
    finally:
        for agent in agents:
            if agent.poll() is None:
                os.killpg(agent.pid, signal.SIGKILL)
                agent.wait()
    return done


def test_the_2d_training_runs_unchanged_on_two_nodes_under_torchrun(tmp_path: Path) -> None:
    script = tmp_path / "train_dp_tp.py"
    script.write_text(notebook_script())
    alone = subprocess.run(
        [sys.executable, str(script), str(tmp_path)], cwd=tmp_path, env=environment(),
        capture_output=True, text=True, timeout=AGENT_TIMEOUT_S,
    )  # fmt: skip
    assert alone.returncode == 0, alone.stdout + alone.stderr
    for agent in run_agents(script, tmp_path):
        assert agent.returncode == 0, agent.stdout
    expected = torch.load(tmp_path / "launcher.pt")
    for rank in range(4):
        got = torch.load(tmp_path / f"torchrun-{rank}.pt")
        assert len(got) == len(expected[rank]) == 4
        for p, e in zip(got, expected[rank], strict=True):
            assert p.shape == e.shape and torch.allclose(p, e, rtol=0, atol=1e-6), f"rank {rank} differs"
