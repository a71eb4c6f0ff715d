"""The student's path in a real browser: JupyterLab 4 in headless Chromium.

For each release notebook: it opens unmodified (the kernel starting must not change it); solved,
it runs with Run All without an error; and every widget it shows works when operated with the
mouse and keyboard: each change redraws the display, and going back redraws what was first shown.
No console error, no "Error displaying widget", on the way. The student's own release notebook is
not run as it is: its exercises raise NotImplementedError until solved, and the widgets draw what
the solved exercises compute. So it is run solved, with the solutions' code in its exercise cells,
as a student who has done them has it.

Needs Chromium (Debian's `chromium` package; or set $CHROMIUM) and Playwright (the `dev` extra;
it drives the installed Chromium, it downloads no browser): `make test-browser`. Without them the
test is skipped, and pytest's summary says so, unless $COURSE_REQUIRE_BROWSER is set, as in CI.
A failure leaves a screenshot of the page in .pytest_cache/browser-failures/ (or $BROWSER_SCREENSHOTS);
the failure's message names it.
"""

from __future__ import annotations

import copy
import os
import platform
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import lab_in_browser as lab_driver
import nbformat
import pytest
from course import ASSIGNMENTS, REPO, notebook_path, read, solution_code, submission

CHROMIUM = lab_driver.find_chromium()
try:
    from playwright.sync_api import sync_playwright
except ImportError:  # not installed: the skip below says how to get it
    sync_playwright = None

MISSING = [
    what
    for what, present in (
        ("Chromium (sudo apt install chromium, or set CHROMIUM=/path/to/chrome)", CHROMIUM),
        ("Playwright (pip install -e '.[dev]')", sync_playwright),
    )
    if not present
]
if MISSING and not os.environ.get("COURSE_REQUIRE_BROWSER"):
    pytest.skip(
        f"BROWSER TEST SKIPPED: it needs {' and '.join(MISSING)}. Then run `make test-browser`.",
        allow_module_level=True,
    )
assert not MISSING, f"$COURSE_REQUIRE_BROWSER is set, but the browser test lacks {' and '.join(MISSING)}"

pytestmark = pytest.mark.browser
SCREENSHOTS = Path(os.environ.get("BROWSER_SCREENSHOTS", REPO / ".pytest_cache" / "browser-failures"))
VIEWPORT = {"width": 1400, "height": 1000}


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """A scratch folder with, per assignment, the release notebook byte for byte and its solved
    copy (``<name>-solved.ipynb``)."""
    root = tmp_path_factory.mktemp("browser") / "course"
    for assignment in ASSIGNMENTS:
        release = notebook_path("notebooks", assignment)
        (root / assignment).mkdir(parents=True)
        shutil.copy(release, root / assignment / release.name)
        solved = submission(read(release), solution_code(read(notebook_path("solutions", assignment))))
        nbformat.write(solved, root / assignment / f"{release.stem}-solved.ipynb")
    return root


@pytest.fixture(scope="module")
def lab(course: Path, tmp_path_factory) -> Iterator[lab_driver.Lab]:
    with lab_driver.jupyterlab(course, tmp_path_factory.mktemp("jupyter")) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=lab_driver.CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@contextmanager
def screenshot_on_failure(page, name: str, lab: lab_driver.Lab) -> Iterator[None]:
    """On a failure, keep a full-page screenshot, say where it is, and show JupyterLab's log."""
    try:
        yield
    except BaseException as failure:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        picture = SCREENSHOTS / f"{name}-{time.strftime('%H%M%S')}.png"
        try:
            page.screenshot(path=str(picture), full_page=True)
            where = f"screenshot of the page: {picture}"
        except Exception as error:  # noqa: BLE001 - the failure itself matters more
            where = f"(no screenshot: {error})"
        raise AssertionError(f"{failure}\n{where}\n{log_tail(lab)}") from failure


def log_tail(lab: lab_driver.Lab, lines: int = 30) -> str:
    """JupyterLab's last lines (kernels started, restarted, died), for a failure's report: CI
    keeps the test's output, not the scratch folder the log is in."""
    kept = [
        line
        for line in lab.log.read_text(errors="replace").splitlines()
        if "Kernel is running over TCP without encryption" not in line
    ]
    return f"the last of JupyterLab's log ({lab.log}):\n" + "\n".join(kept[-lines:])


def assert_only_the_python_version_changed(page, opened: Path, release: Path) -> None:
    """JupyterLab writes the kernel's ``language_info`` into a notebook when the kernel starts,
    and the release carries the one of the Python it was made with. Under that Python, opening
    must change nothing. Under another one (an environment job), the version number is all that
    may change: saved, the notebook must be the release with the kernel's language_info."""
    released = read(release)
    made_with = released.metadata.get("language_info", {}).get("version")
    assert made_with != platform.python_version(), (
        f"{release.name} is marked modified on opening, before any edit: its metadata differs from "
        "what JupyterLab writes (the kernel's language_info; run `make release`)"
    )
    lab_driver.save(page)
    saved = read(opened)
    expected = copy.deepcopy(released)
    expected.metadata.setdefault("language_info", {})["version"] = platform.python_version()
    assert saved == expected, (
        f"{release.name} is marked modified on opening, and saving it changed more than the Python "
        f"version: its language_info was {released.metadata.get('language_info')}, the kernel's is "
        f"{saved.metadata.get('language_info')} (run `make release`)"
    )


def errors_in(notebook: nbformat.NotebookNode) -> list[str]:
    """Each code cell that raised, with the start of its source and its error; and how many never
    ran (Run All stops at the first error)."""
    found, never_ran = [], 0
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        errors = [o for o in cell.outputs if o.output_type == "error"]
        if errors:
            found.append(f"{cell.source[:200]!r}\n  -> {errors[0].ename}: {errors[0].evalue}")
        elif cell.execution_count is None:
            never_ran += 1
    if never_ran:
        found.append(f"{never_ran} code cells never ran")
    return found


@pytest.mark.timeout(900)  # a notebook takes under a minute here, several on a loaded machine
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_student_opens_runs_and_operates_the_notebook(
    lab: lab_driver.Lab, browser, course: Path, assignment: str
) -> None:
    release = notebook_path("notebooks", assignment)
    page = browser.new_page(viewport=VIEWPORT)
    problems = lab_driver.PageProblems()
    problems.watch(page)
    try:
        with screenshot_on_failure(page, assignment, lab):
            # Opened as it is released, in a tab of its own: the kernel starts, and the notebook is
            # still unmodified. The tab is closed; its kernel stays, idle, until JupyterLab stops.
            released = browser.new_page(viewport=VIEWPORT)
            problems.watch(released)
            try:
                lab_driver.open_notebook(released, lab, f"{assignment}/{release.name}")
                time.sleep(1)  # what the kernel's start changes arrives just after it reports idle
                if lab_driver.is_marked_modified(released):
                    assert_only_the_python_version_changed(
                        released, course / assignment / release.name, release
                    )
            finally:
                released.close()

            # Solved, run top to bottom with Run All.
            solved = f"{release.stem}-solved.ipynb"
            lab_driver.open_notebook(page, lab, f"{assignment}/{solved}")
            lab_driver.run_all(page)
            assert not lab_driver.widget_errors(page), lab_driver.widget_errors(page)
            lab_driver.save(page)
            failed = errors_in(read(course / assignment / solved))
            assert not failed, "cells that failed under Run All:\n" + "\n".join(failed)

            # Every widget, operated.
            operated = []
            for root in lab_driver.widget_outputs(page):
                root.scroll_into_view_if_needed()
                operated += lab_driver.operate_every_control(page, root)
                assert not lab_driver.widget_errors(page), lab_driver.widget_errors(page)
            source = "\n".join(c.source for c in read(release).cells if c.cell_type == "code")
            if "explorer(" in source or "ipywidgets" in source:
                assert operated, f"{release.name} makes widgets, and none was found on the page"
            print(f"{assignment}: operated {[(o.label, o.kind, o.shown_values) for o in operated]}")
            assert not problems.errors, "the page reported errors:\n" + "\n".join(problems.errors)
    finally:
        page.close()
