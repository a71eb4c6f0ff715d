"""Before the first submission: can a kernel started as submissions' are grade this course?

``nbgrader autograde``, with the course's configuration, writes its notebooks through
`CheckedExporter` (``c.Autograde.exporter_class``), which nbgrader makes once it knows what it
has to grade and before it touches the first submission. If there is anything to grade, it
starts one kernel exactly as every submission's is started (the configured Execute
preprocessor, with the same settings: sandbox, caps, kernel), imports the course's packages in
it, and compares where they came from with the course whose grading code runs, and checks that
the kernel is guarded against tampering (launcher/guard.py). On a difference,
a failed import, or a kernel that does not start, it logs what was expected, what was found and
the fix, and nbgrader stops (exit status 1) having graded nothing. Without it, one wrong
setting (an environment whose install of the course points at another copy, say) gives a whole
class zeros that look like grades.

The class command (grading/grade_class.py) recognises the stop by `STOPPED` in nbgrader's log.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path
from typing import Any

import nbformat
from nbconvert.exporters import NotebookExporter
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.converters.base import NbGraderException
from traitlets.utils.importstring import import_item

from .distribution import PACKAGES
from .execute import SandboxedExecute
from .release import ROOT
from .sandbox import INSTALL, bwrap_problem

STOPPED = "Grading stopped before the first submission"
REPORT = "course-packages:"  # what starts the check cell's one line of output
# Run in the kernel: import each package and say where it came from (or why it did not import).
CHECK = f"""\
import importlib, json, sys
found = {{}}
for name in {PACKAGES!r}:
    try:
        found[name] = importlib.import_module(name).__file__
    except BaseException as error:  # whatever it is, the instructor needs to see it
        found[name] = "!" + type(error).__name__ + ": " + str(error)
guard = sys.modules.get("launcher.guard")
report = {{"python": sys.executable, "path": sys.path, "found": found}}
print({REPORT!r}, json.dumps({{**report, "guarded": bool(guard and "autograder" in guard.installed())}}))
"""
STARTUP_TIMEOUT_S = 120  # a cold kernel's start, and the course's imports, on a loaded machine


class CheckedExporter(NotebookExporter):
    """nbgrader's notebook exporter, made by the Autograde converter before it grades anything:
    it first checks, once, that a kernel started as submissions' are can grade this course."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        converter = self.parent
        if converter is not None and getattr(converter, "assignments", None):  # something to grade
            problem = check_grading_kernel(converter)
            if problem is not None:
                converter.log.error("%s: %s", STOPPED, problem)
                raise NbGraderException(problem)  # nbgrader's own way to stop, with exit status 1


def check_grading_kernel(converter: Any) -> str | None:
    """Why a kernel started as the converter's submissions' are cannot grade the course, or None."""
    executor_class = _execute_class(converter)
    executor = executor_class(parent=converter)
    if isinstance(executor, SandboxedExecute):
        if executor.sandbox and (problem := bwrap_problem(executor.bwrap)) is not None:
            return f"submissions run in a sandbox, and {problem} {INSTALL}"
        executor.spare_kernel = False
    kernel = executor.kernel_name or _kernel_name(converter)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CHECK)])
    nb.metadata.kernelspec = {"name": kernel, "display_name": kernel, "language": "python"}
    with tempfile.TemporaryDirectory(prefix="grading-check-") as folder:
        executor.kernel_stderr = str(Path(folder) / "kernel-stderr")
        executor.startup_timeout = max(executor.startup_timeout, STARTUP_TIMEOUT_S)
        try:
            # (Run where the submissions' own folders are not: nothing there may stand in for the course.)
            executor.preprocess(nb, {"metadata": {"path": folder}})
        except Exception as error:  # noqa: BLE001 - every way a kernel fails to start is reported
            return did_not_start(kernel, error, _tail(Path(folder) / "kernel-stderr"))
        stderr = _tail(Path(folder) / "kernel-stderr")
    return compare(kernel, nb.cells[0].get("outputs", []), stderr, guarded=getattr(executor, "guard", True))


def did_not_start(kernel: str, error: Exception, stderr: str) -> str:
    why = str(error).strip() or type(error).__name__
    if "the sandbox stopped it" in why:
        fix = (
            "the sandbox's caps are too small for a kernel to start: raise SandboxedExecute.max_memory "
            "or .max_tasks (on the command line, or in nbgrader_config.py)."
        )
    else:
        fix = (
            "see what the kernel wrote. A sandboxed kernel sees only the system's folders, Python's "
            "environment and the course's packages: a Python or a package kept elsewhere (another "
            "user's home, say) cannot run there. To tell whether the sandbox is the cause, grade "
            "one trusted notebook with --SandboxedExecute.sandbox=False."
        )
    wrote = f"\nWhat the kernel wrote:\n{stderr}" if stderr else "\nThe kernel wrote nothing."
    return f"a kernel started as submissions' are ({kernel!r}) did not start: {why}.{wrote}\nFix: {fix}"


def compare(kernel: str, outputs: list, stderr: str = "", guarded: bool = True) -> str | None:
    """What is wrong with the check cell's outputs (see CHECK), or None when the kernel imported
    each of the course's packages from the course being graded."""
    errors = [f"{o.get('ename')}: {o.get('evalue')}" for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    line = next((x for x in text.splitlines() if x.startswith(REPORT)), None)
    if line is None:
        return (
            f"the check that ran in a kernel started as submissions' are ({kernel!r}) said nothing"
            + (f": {errors[0]}" if errors else "")
            + (f"\nWhat the kernel wrote:\n{stderr}" if stderr else "")
            + "\nFix: the kernel stopped or failed before it could import the course; see above."
        )
    report = json.loads(line[len(REPORT) :])
    wrong = []
    for name in PACKAGES:
        expected = ROOT / name / "__init__.py"
        found = report["found"].get(name, "!not reported")
        if found.startswith("!") or Path(found).resolve() != expected.resolve():
            wrong.append((name, expected, found.removeprefix("!")))
    if not wrong and guarded and not report.get("guarded", False):
        return (
            f"a kernel started as submissions' are ({kernel!r}) is not guarded against tampering "
            "(launcher/guard.py): grading installs the guard with the kernel's --IPKernelApp.exec_lines, "
            "and something in the kernel's start overrides them (the kernel spec's argv, say).\nFix: "
            "grade with a plain ipykernel kernel spec (or, to grade unguarded, "
            "--SandboxedExecute.guard=False)."
        )
    if not wrong:
        return None
    lines = [f"  {name}: expected {expected}, found {found}" for name, expected, found in wrong]
    return (
        f"a kernel started as submissions' are ({kernel!r}, Python {report['python']}) does not import "
        f"the course being graded, {ROOT}:\n" + "\n".join(lines) + f"\n{_fix(wrong, report)}"
    )


def _fix(wrong: list[tuple[str, Path, str]], report: dict) -> str:
    """What to do about the packages that were not imported from the course being graded."""
    failed = [found for _, _, found in wrong if not found.startswith("/")]
    unseen = [f for f in failed if any(f"No module named '{name}'" in f for name in PACKAGES)]
    missing = [f for f in failed if f.startswith("ModuleNotFoundError") and f not in unseen]
    if unseen:
        return (
            f"Fix: the kernel does not see the course's packages in {ROOT}, which grading puts first on "
            "its PYTHONPATH (and shows read-only in the sandbox): something in the kernel's start "
            "takes that away (the kernel spec's env or argv, a sitecustomize). The kernel's sys.path: "
            f"{report['path']}"
        )
    if missing:
        return (
            f"Fix: the kernel's Python ({report['python']}) lacks what the course needs ({missing[0]}). "
            "Grade from the environment the course is installed in, or install it into that Python: "
            f"{report['python']} -m pip install -e {ROOT}"
        )
    if failed:
        return (
            f"Fix: importing {wrong[0][0]} failed ({failed[0]}); `python -c 'import {wrong[0][0]}'` "
            "in the grading environment shows the error in full."
        )
    return (
        "Fix: something in the kernel's environment puts another copy of the course first on its "
        "path (PYTHONPATH in the kernel spec, a .pth file, a sitecustomize); remove it. The "
        f"kernel's sys.path: {report['path']}"
    )


def _execute_class(converter: Any) -> type:
    """The Execute preprocessor the converter grades with (the course's: SandboxedExecute)."""
    for item in getattr(converter, "autograde_preprocessors", []):
        cls = import_item(item) if isinstance(item, str) else item
        if isinstance(cls, type) and hasattr(cls, "kernel_manager_class"):
            return cls
    return SandboxedExecute


def _kernel_name(converter: Any) -> str:
    """The kernel the first notebook to grade runs in: its source's, as nbgrader restores it."""
    with contextlib.suppress(MissingEntry, StopIteration, OSError, KeyError, ValueError):
        first = next(iter(converter.assignments.values()))[0]
        assignment = Path(first).parent.name
        with Gradebook(converter.coursedir.db_url, converter.coursedir.course_id) as gradebook:
            spec = gradebook.find_notebook(Path(first).stem, assignment).kernelspec
        return json.loads(spec)["name"] if spec else "python3"
    return "python3"


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
