"""Fixtures shared by the notebook and grading tests: the release, and a class graded from it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from course import REPO
from round_trip import GradedClass, grade_class

from grading.release import generate


@pytest.fixture(scope="session")
def released_course(tmp_path_factory) -> Path:
    """A copy of the course with every assignment released by ``nbgrader generate_assignment``
    and recorded in its gradebook. Tests copy it rather than change it."""
    root = tmp_path_factory.mktemp("course") / "released"
    (root / "grading").mkdir(parents=True)
    shutil.copytree(REPO / "solutions", root / "solutions")
    shutil.copy(REPO / "nbgrader_config.py", root)
    shutil.copy(REPO / "grading" / "nbgrader_config.py", root / "grading")
    generate(["*"], root)
    return root


@pytest.fixture(scope="session")
def graded_class(tmp_path_factory, released_course: Path) -> GradedClass:
    """A class of students (see grading.py), graded by nbgrader."""
    return grade_class(released_course, tmp_path_factory.mktemp("grading"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The test that first asks for the graded class pays for grading it (minutes, every notebook
    # of every assignment): give those tests longer than the suite's 300 s default.
    for item in items:
        if "graded_class" in getattr(item, "fixturenames", ()) and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(900))
