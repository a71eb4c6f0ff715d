"""The student distribution (grading/distribution.py): the release and what it imports, and
nothing that gives away an answer."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from course import ASSIGNMENTS, REPO, notebook_path, read

from grading.distribution import PACKAGES, STUDENT_DOCS, DistributionError, build, main, secrets_in


@pytest.fixture(scope="module")
def distribution(tmp_path_factory: pytest.TempPathFactory) -> Path:
    destination = tmp_path_factory.mktemp("course") / "for-students"
    build(destination)
    return destination


def test_it_holds_the_release_and_no_answers(distribution: Path) -> None:
    top = sorted(p.name for p in distribution.iterdir())
    assert top == sorted(
        [
            *PACKAGES,
            "notebooks",
            "docs",
            "README.md",
            "Makefile",
            "pyproject.toml",
            "environment.yml",
            ".gitignore",
        ]
    )
    for assignment in ASSIGNMENTS:
        released = notebook_path("notebooks", assignment)
        assert (distribution / "notebooks" / assignment / released.name).read_bytes() == released.read_bytes()
    assert secrets_in(distribution) == []
    assert not (distribution / "grading").exists()  # the instructors' tools
    readme = (distribution / "README.md").read_text()
    assert "make course" in readme and "For students" in readme
    assert "For instructors" not in readme and "make test" not in readme
    assert sorted(p.name for p in (distribution / "docs").iterdir()) == sorted(STUDENT_DOCS)
    for page in [distribution / "README.md", *(distribution / "docs").iterdir()]:
        for target in re.findall(r"\]\(([^)#]+\.md)\)", page.read_text()):
            assert (page.parent / target).is_file(), f"{page.name} links to {target}, which students lack"
    assert "course:" in (distribution / "Makefile").read_text()
    assert "test:" not in (distribution / "Makefile").read_text()


def test_every_import_of_the_release_notebooks_works_from_it(distribution: Path) -> None:
    imports = set()
    for assignment in ASSIGNMENTS:
        for cell in read(notebook_path("notebooks", assignment)).cells:
            if cell.cell_type != "code":
                continue
            for node in ast.walk(ast.parse(cell.source)):
                if isinstance(node, ast.ImportFrom):
                    names = [node.module or ""]
                elif isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                else:
                    continue
                if any(name.split(".")[0] in PACKAGES for name in names):
                    imports.add(ast.unparse(node))
    assert any("pipeline_parallel" in i for i in imports)
    program = "\n".join(sorted(imports)) + "\nimport autograder\nprint(autograder.__file__)"
    done = subprocess.run([sys.executable, "-c", program], cwd=distribution, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).is_relative_to(distribution)  # not the repository's


def test_it_installs_as_the_course_without_the_grading_tools(distribution: Path, tmp_path: Path) -> None:
    # What `make course` installs there (the pyproject.toml copied as it is): a wheel of the
    # student packages, subpackages included, and none of grading/. (Built from a copy: building
    # leaves a build/ folder behind.)
    course = shutil.copytree(distribution, tmp_path / "course")
    modules = {p.relative_to(course).as_posix() for p in course.rglob("*.py")}
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            "wheels",
            ".",
        ],
        cwd=course,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (course / "wheels").glob("*.whl")
    packed = {name for name in zipfile.ZipFile(wheel).namelist() if name.endswith(".py")}
    assert packed == modules and {name.split("/")[0] for name in packed} == set(PACKAGES)


def test_a_solution_or_hidden_test_is_found(tmp_path: Path) -> None:
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "a.ipynb").write_text('{"source": "### BEGIN HIDDEN TESTS"}')
    (tmp_path / "solutions").mkdir()
    assert secrets_in(tmp_path) == [
        "notebooks/a.ipynb: holds 'BEGIN HIDDEN TESTS'",
        "solutions: not for students",
    ]


def test_it_never_overwrites_without_being_told(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    destination = tmp_path / "for-students"
    destination.mkdir()
    (destination / "my-answers.ipynb").write_text("{}")
    with pytest.raises(DistributionError, match="not empty"):
        build(destination)
    assert main([str(destination)]) == 1
    assert "--force" in capsys.readouterr().err
    assert (destination / "my-answers.ipynb").exists()
    assert main([str(destination), "--force", "--zip"]) == 0
    assert not (destination / "my-answers.ipynb").exists()
    assert (tmp_path / "for-students.zip").stat().st_size > 0
    assert main([str(destination), "--zip"]) == 1  # the folder and the archive are there now
    for inside in (REPO, REPO / "autograder" / "for-students", REPO / "dist"):
        with pytest.raises(DistributionError, match="inside the course"):
            build(inside)
