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


# `make test` runs the suite in two pytest-xdist workers, each taking a group of tests at a time: a
# test file, so that its module fixtures are made once, except that the files sharing the released
# course and the class graded from it are one group (grading that class takes minutes, and a second
# worker would grade it again). Groups start longest first, so that the other worker takes the
# rest meanwhile rather than a long group at the end.
SHARED_COURSE = "the released course"
SHARED_COURSE_FILES = ("test_grading.py", "test_notebooks.py", "test_grade_class.py")
LONGEST_FIRST = (SHARED_COURSE, "test_wrong_submissions.py", "test_sandbox.py", "test_no_silent_zeros.py")


def group_of(nodeid: str) -> str:
    """The group of the test ``nodeid`` names (``tests/test_x.py::test_y[...]``)."""
    filename = nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    return SHARED_COURSE if filename in SHARED_COURSE_FILES else filename


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    # (pytest-xdist's own "loadgroup" reads groups from marks, which pytest 9.2's node ids
    # no longer carry; this schedules by the same rule, from the ids the workers collected.)
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    config.option.loadscopereorder = False  # the order collected: longest first
    return ByGroup(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if {"released_course", "graded_class"} & fixtures and group_of(item.nodeid) != SHARED_COURSE:
            raise pytest.UsageError(
                f"{item.nodeid} uses the released course: add its file to SHARED_COURSE_FILES in "
                "tests/conftest.py, so that one worker makes it and grades its class"
            )
        # The test that first asks for the graded class pays for grading it (minutes, every
        # notebook of every assignment): give those tests longer than the suite's 300 s default.
        if "graded_class" in fixtures and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(900))
    rank = {group: i for i, group in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(group_of(item.nodeid), len(rank)))  # stable: files keep their order


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
