"""Build the student distribution: what the students of a graded class receive.

    python -m grading.distribution ../course-for-students          # a folder
    python -m grading.distribution ../course-for-students --zip    # ...and a zip of it
    make distribution DEST=../course-for-students

This repository is the instructors' course directory, and a self-learner's full copy: it holds
the solutions and the hidden tests. The distribution holds only the release notebooks
(notebooks/, made by ``grading.release``) and the packages they import (launcher/, visuals/,
and the checks in autograder/), the students' pages of docs/, with a README and a Makefile of
their own: no solutions/, no
hidden tests, no tests/, none of the instructors' tools. Hand it out as a folder or an archive,
or commit it to a repository of its own. The command checks what it wrote and refuses to
write into a folder that is not empty, unless told to with ``--force``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

from .release import ROOT, assignments

PACKAGES = ["launcher", "visuals", "autograder"]
FILES = ["pyproject.toml", "environment.yml", ".gitignore"]
# The pages of docs/ written for students; the others are for instructors and contributors.
STUDENT_DOCS = ["students.md", "notebooks.md", "launcher.md"]
# Markers nbgrader leaves only in source notebooks: none may reach a student.
SECRET_MARKERS = ["BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"]

MAKEFILE = """\
# make course: set up .venv and start JupyterLab on notebooks/
PYTHON ?= python3
VENV ?= .venv
# torch is installed first, pinned, so that pip never picks a build on its own. On a Linux
# machine without a GPU, the CPU-only build is much smaller:
#   make course TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH ?= {torch}
TORCH_INDEX ?=
BIN := $(VENV)/bin
LAB_ARGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: course
course: $(VENV)/.installed-lab
\t$(BIN)/jupyter lab --notebook-dir=notebooks $(LAB_ARGS)

$(VENV)/.installed-lab: pyproject.toml
\ttest -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
\t$(BIN)/python -m pip install --quiet --upgrade pip
\t$(BIN)/pip install --quiet "$(TORCH)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
\t$(BIN)/pip install --quiet -e ".[lab]"
\ttouch $@
"""


class DistributionError(Exception):
    """The distribution cannot be built (or was not, as asked); the message says why."""


def student_links(text: str, folder: str = "") -> str:
    """``text`` with its links to docs pages the distribution leaves out made plain text, and those
    to the pages it holds made relative to ``folder``."""

    def link(match: re.Match) -> str:
        words, page = match.group(1), match.group(2).rsplit("/", 1)[-1]
        return f"[{words}]({folder}{page})" if page in STUDENT_DOCS else words

    return re.sub(r"\[([^\]]+)\]\(((?:docs/)?[\w-]+\.md)\)", link, text)


def readme(root: Path = ROOT) -> str:
    """The students' README: the course README's title and what the course is, then the students'
    guide (docs/students.md); not the guides for instructors and developers."""
    text = (root / "README.md").read_text()
    sections = re.split(r"(?m)^(?=## )", text)
    title = sections[0].splitlines()[0]
    keep = [s for s in sections[1:] if s.startswith("## What this is")]
    guide = "## For students\n" + (root / "docs" / "students.md").read_text().split("\n", 1)[1]
    setup = (
        "```bash\nmake course   # create .venv, install the course, open the notebooks in JupyterLab\n```\n\n"
        "It needs Python 3.10 or newer (with `venv`) and `make`, and downloads PyTorch the first time.\n"
        "On a Linux machine without a GPU, `make course TORCH_INDEX=https://download.pytorch.org/whl/cpu`\n"
        "installs the much smaller CPU-only build of PyTorch.\n\n"
    )
    return student_links(f"{title}\n\n{setup}" + "".join(keep) + guide, "docs/")


def makefile(root: Path = ROOT) -> str:
    """The students' Makefile: `make course` only, with the course Makefile's torch pin."""
    pin = re.search(r"(?m)^TORCH \?= (.+)$", (root / "Makefile").read_text())
    return MAKEFILE.format(torch=pin.group(1) if pin else "torch")


def secrets_in(folder: Path) -> list[str]:
    """Files under ``folder`` that hold a solution or a hidden test (or are no release at all)."""
    found = []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if relative.parts[0] in ("solutions", "tests", "source"):
            found.append(f"{relative}: not for students")
        elif path.is_file() and path.suffix in (".ipynb", ".py", ".md", ".txt", ".toml", ".yml"):
            text = path.read_text(errors="replace")
            found += [f"{relative}: holds {marker!r}" for marker in SECRET_MARKERS if marker in text]
    return found


def build(destination: Path, root: Path = ROOT, force: bool = False) -> list[Path]:
    """Write the student distribution to ``destination``; return the files written."""
    destination = destination.resolve()
    if destination == root or root in destination.parents:
        raise DistributionError(f"{destination} is inside the course directory: choose a place outside it.")
    if destination.exists() and any(destination.iterdir()):
        if not force:
            raise DistributionError(
                f"{destination} is not empty: it may hold a distribution students already work in. "
                "Choose an empty folder, or pass --force to replace what is there."
            )
        shutil.rmtree(destination)
    missing = [a for a in assignments(root) if not (root / "notebooks" / a).is_dir()]
    if missing:
        raise DistributionError(f"no release of {', '.join(missing)}: run `make release` first.")
    destination.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")
    for package in PACKAGES:
        shutil.copytree(root / package, destination / package, ignore=ignore)
    shutil.copytree(root / "notebooks", destination / "notebooks", ignore=ignore)
    for name in FILES:
        if (root / name).exists():
            shutil.copy2(root / name, destination / name)
    (destination / "docs").mkdir()
    for page in STUDENT_DOCS:
        (destination / "docs" / page).write_text(student_links((root / "docs" / page).read_text()))
    (destination / "README.md").write_text(readme(root))
    (destination / "Makefile").write_text(makefile(root))
    leaks = secrets_in(destination)
    if leaks:
        shutil.rmtree(destination)
        raise DistributionError(
            "the distribution would give away answers, so it was removed:\n" + "\n".join(leaks)
        )
    return sorted(p for p in destination.rglob("*") if p.is_file())


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("destination", type=Path, help="an empty folder (made if missing)")
    parser.add_argument("--zip", action="store_true", help="also write <destination>.zip")
    parser.add_argument("--force", action="store_true", help="replace what is in the folder")
    args = parser.parse_args(argv)
    archive = args.destination.resolve().with_name(args.destination.resolve().name + ".zip")
    if args.zip and archive.exists() and not args.force:
        print(f"grading.distribution: {archive} exists; pass --force to replace it.", file=sys.stderr)
        return 1
    try:
        files = build(args.destination, root, force=args.force)
    except DistributionError as err:
        print(f"grading.distribution: {err}", file=sys.stderr)
        return 1
    size = sum(f.stat().st_size for f in files)
    print(f"wrote {len(files)} files ({size / 1e6:.1f} MB) to {args.destination}")
    if args.zip:
        shutil.make_archive(str(archive.with_suffix("")), "zip", args.destination)
        print(f"and {archive}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
