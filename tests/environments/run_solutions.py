"""Run every solution notebook top to bottom, hidden tests included, in this Python's kernel,
as a student's environment would run it; print each one's time, and fail on the first error.

    python tests/environments/run_solutions.py [assignment ...] [--save FOLDER]

``--save`` keeps each executed notebook, outputs included, in FOLDER (on a GPU machine, to read
what the GPU cells measured).

The environment jobs (`make test-colab`, `make test-oldest`) run it with the environment's own
Python, so the kernel, torch, ipywidgets and matplotlib are the environment's.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

try:  # the grader's client needs jupyter_client 7's asynchronous channels, which Colab's lacks
    from grading.kernel_client import PromptKernelClient
except ImportError:
    PromptKernelClient = None

ROOT = Path(__file__).resolve().parents[2]
CELL_TIMEOUT = 300  # seconds; the slowest cell of any solution takes a few here
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def run(notebook: Path, save: Path | None = None) -> float:
    """Execute ``notebook`` in a fresh kernel from its own folder; the seconds it took."""
    content = nbformat.read(notebook, as_version=4)
    client = NotebookClient(
        content,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(notebook.parent)}},
    )
    # Now and then a reply that has arrived does not wake pyzmq's poll, and nbclient's own client
    # waits out the cell's whole timeout for it (seen on an H200 machine: 300 s after 03's widget
    # of cost models); the grader's client looks every second (grading/kernel_client.py).
    client.km = client.create_kernel_manager()
    if PromptKernelClient is not None:
        client.km.client_factory = PromptKernelClient
    start = time.perf_counter()
    try:
        client.execute()
    finally:
        if save is not None:
            save.mkdir(parents=True, exist_ok=True)
            nbformat.write(content, save / notebook.name)
    return time.perf_counter() - start


def main(chosen: list[str], save: Path | None = None) -> int:
    notebooks = sorted((ROOT / "solutions").glob("*/*.ipynb"))
    if chosen:
        notebooks = [n for n in notebooks if n.parent.name in chosen]
    if not notebooks:
        print(f"no solution notebook matches {chosen}")
        return 1
    import ipywidgets
    import matplotlib
    import torch

    print(
        f"Python {sys.version.split()[0]}, torch {torch.__version__}, "
        f"ipywidgets {ipywidgets.__version__}, matplotlib {matplotlib.__version__}"
    )
    for notebook in notebooks:
        name = notebook.relative_to(ROOT)
        try:
            seconds = run(notebook, save)
        except CellExecutionError as error:
            print(f"FAILED {name}:\n{ANSI.sub('', str(error))}")
            return 1
        print(f"ran {name} to the end in {seconds:.1f} s")
    print(f"{len(notebooks)} passed, 0 failed")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("assignments", nargs="*", help="assignment folders (default: all)")
    parser.add_argument("--save", type=Path, help="keep the executed notebooks in this folder")
    args = parser.parse_args()
    sys.exit(main(args.assignments, args.save))
