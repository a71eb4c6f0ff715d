"""The repository's promises: the README's two commands, CI running them, dependencies in step,
and the release command never overwriting a student's answers."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from course import REPO

from grading import release

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib


def requirement_names(requirements: list[str]) -> dict[str, str]:
    """{"torch": ">=2.5", ...} from a list of requirement strings."""
    pairs = (re.match(r"([A-Za-z0-9_.-]+)\s*(.*)", r.strip()).groups() for r in requirements)
    return {name.lower(): spec.replace(" ", "") for name, spec in pairs}


def test_environment_yml_and_pyproject_name_the_same_dependencies() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    student = requirement_names(project["dependencies"] + project["optional-dependencies"]["lab"])
    lines = (REPO / "environment.yml").read_text().split("dependencies:")[1].splitlines()
    conda = [
        line.strip()[2:]
        for line in lines
        if line.startswith("  - ") and not line.strip()[2:].startswith("pip")
    ]
    conda_names = requirement_names(c for c in conda if not c.startswith("python"))
    conda_names["torch"] = conda_names.pop("pytorch")  # conda-forge's name for it
    assert conda_names == student


def test_students_do_not_install_the_instructors_tools() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    student = requirement_names(project["dependencies"] + project["optional-dependencies"]["lab"])
    assert set(student) == {"torch", "cloudpickle", "ipywidgets", "matplotlib", "jupyterlab"}
    assert "nbgrader" in requirement_names(project["optional-dependencies"]["instructor"])


def test_the_readme_opens_with_the_two_commands_and_ci_runs_the_second() -> None:
    readme = (REPO / "README.md").read_text()
    first_block = readme.split("```")[1]
    assert re.search(r"^make course\b", first_block.split("\n", 1)[1], re.MULTILINE)
    assert re.search(r"^make test\b", first_block.split("\n", 1)[1], re.MULTILINE)
    assert "make test" in (REPO / ".ci" / "run").read_text()
    makefile = (REPO / "Makefile").read_text()
    test_target = re.search(r"^test:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    lint_target = re.search(r"^lint:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert "pytest" in test_target.group(1) and "lint" in test_target.group(0)
    assert "ruff format --check" in lint_target.group(1) and "ruff check" in lint_target.group(1)


@pytest.fixture
def course_clone(tmp_path: Path) -> Path:
    """A git clone-like copy of the course: solutions and release committed."""
    for folder in ("solutions", "notebooks"):
        shutil.copytree(REPO / folder, tmp_path / folder)
    for command in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"],
    ):
        subprocess.run(["git", *command], cwd=tmp_path, check=True)
    return tmp_path


def test_the_release_command_will_not_overwrite_a_students_answers(
    course_clone: Path, monkeypatch, capsys
) -> None:
    generated = []
    monkeypatch.setattr(release, "generate", lambda ids, root: generated.append(ids))
    assert release.main([], root=course_clone) == 0 and generated == [["*"]]  # nothing changed yet

    (answer,) = (course_clone / "notebooks" / "02-collectives").glob("*.ipynb")
    answer.write_text(answer.read_text().replace("raise NotImplementedError()", "return []", 1))
    assert release.main([], root=course_clone) == 1
    assert "notebooks/02-collectives/collectives.ipynb" in capsys.readouterr().err
    assert generated == [["*"]]  # refused: nothing regenerated

    assert release.main(["--force", "02-collectives"], root=course_clone) == 0
    assert generated[-1] == ["02-collectives"]


def test_the_release_command_names_an_unknown_assignment(course_clone: Path, capsys) -> None:
    with pytest.raises(SystemExit):
        release.main(["99-unknown"], root=course_clone)
    assert "no such assignment: 99-unknown" in capsys.readouterr().err


# Which of the course's packages each one may import. The checks that test cells call
# (autograder) use the launcher; the plots and widgets (visuals) may use both; the launcher uses
# neither; the instructors' grading machinery (grading) imports none of them: it runs them in
# kernels. And none of the others imports grading.
MAY_IMPORT = {
    "launcher": set(),
    "autograder": {"launcher"},
    "visuals": {"launcher", "autograder"},
    "grading": set(),
}


def wrong_way_imports(root: Path) -> list[str]:
    """Each import, anywhere in a module (in a function too, or relative), of a course package
    that the importing package may not import, as "path: module"."""
    found = []
    for package, allowed in MAY_IMPORT.items():
        for path in sorted((root / package).rglob("*.py")):
            here = path.relative_to(root).with_suffix("").parts
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    modules = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    # A relative import, resolved: `from ..grading import x` in autograder/a.py.
                    base = list(here[: len(here) - node.level]) if node.level else []
                    modules = [".".join([*base, *filter(None, [node.module])])]
                else:
                    continue
                for module in modules:
                    top = module.split(".")[0]
                    if top in MAY_IMPORT and top != package and top not in allowed:
                        found.append(f"{path.relative_to(root)}: {module}")
    return found


def test_imports_go_one_way() -> None:
    assert wrong_way_imports(REPO) == []


def test_an_import_the_wrong_way_is_found(tmp_path: Path) -> None:
    for package in MAY_IMPORT:
        (tmp_path / package / "inner").mkdir(parents=True)
    (tmp_path / "autograder" / "checks.py").write_text(
        "from launcher import launch\n\n\ndef f():\n    import grading.sandbox\n"
    )
    (tmp_path / "autograder" / "inner" / "deep.py").write_text(
        "from ...grading import sandbox\nfrom .. import checks\n"
    )
    (tmp_path / "launcher" / "call.py").write_text("import visuals, os\n")
    (tmp_path / "grading" / "sandbox.py").write_text(
        "from . import watchdog\nfrom autograder.checks import fail\n"
    )
    assert wrong_way_imports(tmp_path) == [
        "launcher/call.py: visuals",
        "autograder/checks.py: grading.sandbox",
        "autograder/inner/deep.py: grading",
        "grading/sandbox.py: autograder.checks",
    ]
