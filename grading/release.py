"""Regenerate the student release, notebooks/, from the instructors' solutions/, with nbgrader.

    python -m grading.release                   # every assignment in solutions/
    python -m grading.release 02-collectives    # just this one
    python -m grading.release --force           # even over uncommitted changes in notebooks/

Each assignment goes through ``nbgrader generate_assignment``, which writes notebooks/<id>/ and
records the assignment (its cells and points) in the gradebook that autograding needs. The
command refuses to run while git shows uncommitted changes under notebooks/: in a student's
clone of the course, those are the student's answers.

Each released notebook's metadata then gets the ``language_info`` that this environment's Python
kernel reports. JupyterLab writes the kernel's ``language_info`` into a notebook as soon as the
kernel starts, and marks the notebook modified if that changes it; with the kernel's own, a student
whose Python is the release's opens an unmodified notebook.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent


def assignments(root: Path = ROOT) -> list[str]:
    """The assignments: one folder per notebook under solutions/, e.g. "01-memory-hierarchy"."""
    return sorted(p.name for p in (root / "solutions").iterdir() if p.is_dir() and any(p.glob("*.ipynb")))


def uncommitted_changes(root: Path = ROOT) -> list[str]:
    """Files under notebooks/ that git shows as changed (nothing if this is not a git checkout)."""
    try:
        status = subprocess.run(
            ["git", "status", "--porcelain", "--", "notebooks"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    return [line[3:] for line in status.splitlines()]


def nbgrader_environment() -> dict[str, str]:
    """The environment for running nbgrader: its helper commands (alembic) must be on PATH."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def kernel_language_info() -> dict:
    """What ipykernel, run by this Python, reports as its language: name, exact version, lexers."""
    from ipykernel.ipkernel import IPythonKernel  # ipykernel comes with nbgrader

    return dict(IPythonKernel.language_info)


def record_language_info(notebook: Path) -> None:
    """Give a released notebook the kernel's complete ``language_info`` (nbgrader keeps the
    solutions' bare ``{"name": "python"}``), written as nbgrader writes notebooks."""
    content = nbformat.read(notebook, as_version=nbformat.NO_CONVERT)
    content.metadata["language_info"] = kernel_language_info()
    nbformat.write(content, notebook)


def generate(ids: list[str], root: Path = ROOT) -> None:
    """Run ``nbgrader generate_assignment`` for each assignment (``"*"``: all of them), from ``root``."""
    for assignment in ids:
        command = [sys.executable, "-m", "nbgrader", "generate_assignment", assignment, "--force"]
        subprocess.run(command, cwd=root, env=nbgrader_environment(), check=True)
        for notebook in sorted((root / "notebooks").glob(f"{assignment}/*.ipynb")):
            record_language_info(notebook)


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("assignments", nargs="*", help="assignment ids (default: all in solutions/)")
    parser.add_argument("--force", action="store_true", help="overwrite uncommitted changes in notebooks/")
    options = parser.parse_args(argv)
    known = assignments(root)
    unknown = [a for a in options.assignments if a not in known]
    if unknown:
        parser.error(f"no such assignment: {', '.join(unknown)} (solutions/ has {', '.join(known)})")
    changed = uncommitted_changes(root)
    if changed and not options.force:
        listing = "\n  ".join(changed)
        print(
            f"notebooks/ has uncommitted changes, which regenerating would overwrite:\n  {listing}\n"
            "If they are a student's answers, keep a copy first. To overwrite them, run again with --force.",
            file=sys.stderr,
        )
        return 1
    generate(options.assignments or ["*"], root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
