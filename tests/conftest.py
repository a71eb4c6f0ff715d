"""Fixtures shared by the notebook and grading tests: the release, and a class graded from it;
and every test's time limit, stretched when the machine runs slowly."""

from __future__ import annotations

from pathlib import Path

import machine
import pytest
from round_trip import GradedClass, grade_class, release_course


@pytest.fixture(scope="session")
def released_course(tmp_path_factory) -> Path:
    """A copy of the course with every assignment released by ``nbgrader generate_assignment``
    and recorded in its gradebook. Tests copy it rather than change it."""
    return release_course(tmp_path_factory.mktemp("course") / "released")


@pytest.fixture(scope="session")
def graded_class(tmp_path_factory, released_course: Path) -> GradedClass:
    """A class of students (see round_trip.py), graded by nbgrader."""
    return grade_class(released_course, tmp_path_factory.mktemp("grading"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The test that first asks for the graded class pays for grading it (minutes, every notebook
    # of every assignment): give those tests longer than the suite's 300 s default.
    for item in items:
        if "graded_class" in getattr(item, "fixturenames", ()) and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(900))


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    # Each test's limit, set for an idle machine, stretched by how slowly the machine runs now
    # (tests/machine.py), before pytest-timeout reads it.
    marker = item.get_closest_marker("timeout")
    limit = (marker.args[0] if marker.args else marker.kwargs.get("timeout")) if marker else None
    limit = item.config.getini("timeout") if limit is None else limit
    if limit and float(limit) > 0:
        item.add_marker(pytest.mark.timeout(machine.scaled(float(limit))), append=False)
    yield
