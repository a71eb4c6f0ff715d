"""A real Jupyter kernel, driven by nbclient, in which a test runs cells one at a time."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

from grading.kernel_client import PromptKernelClient

REPO = Path(__file__).resolve().parent.parent
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class CellRun:
    """What one executed cell produced."""

    cell: Any

    def _streams(self, name: str) -> str:
        return "".join(
            o["text"] for o in self.cell.outputs if o["output_type"] == "stream" and o["name"] == name
        )

    @property
    def stdout(self) -> str:
        return self._streams("stdout")

    @property
    def stderr(self) -> str:
        return self._streams("stderr")

    @property
    def error(self) -> dict[str, str] | None:
        """``{"ename", "evalue", "traceback"}`` of the cell's exception (ANSI colours removed)."""
        for output in self.cell.outputs:
            if output["output_type"] == "error":
                return {
                    "ename": output["ename"],
                    "evalue": output["evalue"],
                    "traceback": _ANSI.sub("", "\n".join(output["traceback"])),
                }
        return None

    def json(self) -> Any:
        """The cell's last stdout line, parsed as JSON."""
        assert self.error is None, self.error
        return json.loads(self.stdout.strip().splitlines()[-1])


class Kernel:
    """One kernel; ``run(source)`` executes a new cell in it and returns its outputs."""

    def __init__(self, client: NotebookClient, notebook: Any) -> None:
        self.client = client
        self.notebook = notebook

    def run(self, source: str, timeout: float | None = None, interrupt_on_timeout: bool = False) -> CellRun:
        cell = nbformat.v4.new_code_cell(source)
        self.notebook.cells.append(cell)
        saved = (self.client.timeout, self.client.interrupt_on_timeout)
        if timeout is not None:
            self.client.timeout = timeout
        self.client.interrupt_on_timeout = interrupt_on_timeout
        try:
            self.client.execute_cell(cell, len(self.notebook.cells) - 1)
        finally:
            self.client.timeout, self.client.interrupt_on_timeout = saved
        return CellRun(cell)

    def ok(self, source: str, **kwargs: Any) -> CellRun:
        """Run a cell that must not raise."""
        run = self.run(source, **kwargs)
        assert run.error is None, f"cell raised:\n{run.error['traceback']}"
        return run


@contextmanager
def kernel(cwd: Path = REPO, timeout: float = 120) -> Iterator[Kernel]:
    notebook = nbformat.v4.new_notebook()
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(cwd)}},
    )
    client.km = client.create_kernel_manager()
    client.km.client_factory = PromptKernelClient  # (see grading/kernel_client.py)
    with client.setup_kernel():
        yield Kernel(client, notebook)


# Lists the kernel's descendant processes; run inside the kernel.
DESCENDANTS = """
import json, psutil
print(json.dumps([
    {"pid": p.pid, "ppid": p.ppid(), "status": p.status(), "cmdline": " ".join(p.cmdline())}
    for p in psutil.Process().children(recursive=True)
]))
"""


def assert_only_fork_server(k: Kernel) -> None:
    """After any outcome of launch, the kernel's only descendant is the idle fork server."""
    processes = k.run(DESCENDANTS).json()
    assert len(processes) == 1, f"expected only the fork server, found {processes}"
    (server,) = processes
    assert "launcher.forkserver" in server["cmdline"], server
    assert server["status"] != "zombie", server
