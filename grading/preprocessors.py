"""The nbgrader preprocessors the course's configuration adds (grading/nbgrader_config.py).

- `ScoreErrorsNotStderr` (autograding): nbgrader scores a test cell zero when it wrote anything
  to stderr, so a correct answer that warns, logs, or whose ranks print to stderr would lose the
  test's points. A test cell here fails by raising; what it wrote to stderr is kept, as output.
- `FlagTampering` (autograding): a test cell that comes after submitted code which changes what
  grading relies on (the course's checks or launcher, torch, builtins, ``sys.modules``, IPython's
  hooks) or reaches into other code's frames fails, saying so, and the submission is logged for
  the instructor to look at. It reads the code for the evident spellings; the kernel's guard
  (launcher/guard.py) catches the code at work however it is spelled, and what it caught is
  logged here too.
- `HideHiddenTests` (feedback): nbgrader's feedback is the autograded notebook as HTML, which
  holds the hidden tests: in the test cells' source, and in the tracebacks of those that failed,
  which quote the lines around the failing call. It removes the hidden regions from the test
  cells, as the release does, and reduces every error in a test cell to its type and message.

Only instructors run these: students' notebooks never import this module.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import nbformat
from nbformat.v4 import new_output
from nbgrader import utils
from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor


class ScoreErrorsNotStderr(NbGraderPreprocessor):
    """Let a test cell's stderr count as output, not as a failure: it fails by raising."""

    def preprocess_cell(self, cell: Any, resources: dict, cell_index: int) -> tuple[Any, dict]:
        if cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "stream" and output.get("name") == "stderr":
                    output["name"] = "stdout"
        return cell, resources


class HideHiddenTests(ClearHiddenTests):
    """ClearHiddenTests for feedback: also drops the tracebacks of test cells' errors."""

    def preprocess_cell(self, cell: Any, resources: dict, cell_index: int) -> tuple[Any, dict]:
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if cell.cell_type == "code" and utils.is_grade(cell):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    # The message says what failed and why; the traceback would show the code.
                    output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return cell, resources


# -- tampering -------------------------------------------------------------------------------

# What a student's code may not change: the course's checks and launcher, and what they rely on.
PROTECTED = {"autograder", "launcher", "torch", "builtins", "sys", "IPython", "numpy", "math", "operator"}
# Settings a student may change under a protected package.
ALLOWED = ("torch.backends.",)
# Calls that reach into other code's frames or objects, or into the interpreter.
REACHING = {
    "sys._getframe",
    "sys.settrace",
    "sys.setprofile",
    "inspect.currentframe",
    "inspect.stack",
    "inspect.getouterframes",
    "gc.get_objects",
    "gc.get_referrers",
    "get_ipython",
    "setattr",
    "delattr",
}


# Attributes that lead from an object to other code's frames, variables or closures.
REACHING_ATTRIBUTES = {
    "tb_frame",
    "gi_frame",
    "cr_frame",
    "ag_frame",
    "f_back",
    "f_locals",
    "f_globals",
    "__closure__",
    "cell_contents",
    "__globals__",
}
# What IPython makes of a shell escape (``!ls``, ``x = !ls``): the shell, not tampering.
SHELL_ESCAPES = ("system", "getoutput")


def _constant_getattr(node: ast.AST) -> tuple[ast.AST, str] | None:
    """``(obj, "name")`` for ``getattr(obj, "name")``: the attribute, however it is spelled."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    ):
        return node.args[0], node.args[1].value
    return None


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """``a.b.c`` for an attribute chain on a name (``getattr(a, "b")`` included), with the name
    resolved through the imports."""
    parts = []
    while isinstance(node, ast.Attribute) or _constant_getattr(node) is not None:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        else:
            node, name = _constant_getattr(node)
            parts.append(name)
    if not isinstance(node, ast.Name):
        return None
    return ".".join([aliases.get(node.id, node.id), *reversed(parts)])


def _protected(name: str | None) -> bool:
    return name is not None and name.split(".")[0] in PROTECTED and not name.startswith(ALLOWED)


def imports(source: str) -> dict[str, str]:
    """The names a cell's imports bind, and the dotted names they stand for."""
    aliases = {}
    for node in ast.walk(_parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def _python(source: str) -> str:
    """A cell's code as Python, IPython's magics and shell escapes turned into the calls they are."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        return TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 - what IPython cannot read, the kernel could not run
        return source


def imports_in(cells: list) -> dict[str, str]:
    """The names all of a notebook's code cells import (see `imports`)."""
    aliases: dict[str, str] = {}
    for cell in cells:
        if cell.cell_type == "code":
            aliases.update(imports(cell.source))
    return aliases


def _parse(source: str) -> ast.AST:
    try:
        return ast.parse(_python(source))
    except SyntaxError:  # the kernel could not have run it either
        return ast.Module(body=[], type_ignores=[])


def _magic_code(node: ast.Call) -> str | None:
    """The code a magic runs (``%time x = 1``, ``%%capture`` ...), from IPython's own call."""
    func = node.func
    if not (isinstance(func, ast.Attribute) and func.attr in ("run_line_magic", "run_cell_magic")):
        return None
    strings = [a.value for a in node.args[1:] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return "\n".join(strings)


def tampering(source: str, aliases: dict[str, str]) -> list[str]:
    """What in ``source`` changes the course's checks, torch, builtins, ``sys.modules`` or IPython,
    or reaches into other code's frames: each as a line of the source."""
    found, magics = [], set()
    code = _python(source)
    tree = _parse(source)
    calls = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    for node in ast.walk(tree):
        if id(node) in magics:
            continue
        if isinstance(node, ast.Call) and _magic_code(node) is not None:
            found += tampering(_magic_code(node), aliases)  # what the magic runs, not the magic
            magics.add(id(node.func.value))  # IPython's own get_ipython() call
            continue
        if _shell_escape(node):
            magics.add(id(node.func.value))
            continue
        targets = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        blocking = isinstance(getattr(node, "value", None), ast.Constant) and node.value.value is None
        for target in targets:
            base = target.value if isinstance(target, ast.Subscript) else target
            if blocking and isinstance(target, ast.Subscript) and _dotted(base, aliases) == "sys.modules":
                continue  # making a module impossible to import can only make tests fail
            if isinstance(target, (ast.Attribute, ast.Subscript)) and _protected(_dotted(base, aliases)):
                found.append(ast.get_source_segment(code, node) or "")
        if isinstance(node, ast.Call):
            called = _dotted(node.func, aliases)
            first = _dotted(node.args[0], aliases) if node.args else None
            if called in ("setattr", "delattr") and not _protected(first):
                continue
            if called in REACHING or (called or "").startswith(
                ("sys.modules.", "sys.meta_path.", "sys.path_hooks.")
            ):
                found.append(ast.get_source_segment(code, node) or "")
        if isinstance(node, ast.Name) and node.id == "__builtins__":
            found.append("__builtins__")
        found += _reaching(node, code, aliases, calls)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
            if any((n or "").split(".")[0] == "ctypes" for n in names):
                found.append(ast.get_source_segment(code, node) or "")
    return [line.splitlines()[0][:120] for line in found]


# What the kernel's guard (launcher/guard.py) raises when it catches code at work.
CAUGHT = ("TamperingDetected", "TamperingRefused")


def _caught_running(cell: Any) -> list[str]:
    """What the guard caught while ``cell`` ran, as its error says (the kernel's or a rank's)."""
    caught = []
    for output in cell.get("outputs", []):
        text = f"{output.get('ename', '')}: {output.get('evalue', '')}"
        if output.get("output_type") == "error" and any(name in text for name in CAUGHT):
            caught.append(text.split("\n")[0][:200])
    return caught


def _shell_escape(node: ast.AST) -> bool:
    """Whether ``node`` is IPython's ``get_ipython().system("ls")``, what ``!ls`` becomes."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in SHELL_ESCAPES
        and isinstance(node.func.value, ast.Call)
        and isinstance(node.func.value.func, ast.Name)
        and node.func.value.func.id == "get_ipython"
        and all(isinstance(arg, ast.Constant) for arg in node.args)
    )


def _reaching(node: ast.AST, code: str, aliases: dict[str, str], calls: set[int]) -> list[str]:
    """What in ``node`` reaches into other code however it is spelled: a reaching function named
    but not called (``cur = inspect.currentframe``), an attribute that leads to frames or
    closures, a protected module's namespace (``vars(torch)``, ``torch.__dict__``)."""
    segment = ast.get_source_segment(code, node) or ""
    if isinstance(node, ast.Attribute) and node.attr in REACHING_ATTRIBUTES:
        return [segment]
    if isinstance(node, (ast.Attribute, ast.Name)) and id(node) not in calls:
        name = _dotted(node, aliases)
        if name in REACHING and name not in ("setattr", "delattr", "get_ipython"):
            return [segment]
    if (
        isinstance(node, ast.Attribute)
        and node.attr == "__dict__"
        and _protected(_dotted(node.value, aliases))
    ):
        return [segment]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "vars"
        and node.args
        and _protected(_dotted(node.args[0], aliases))
    ):
        return [segment]
    if isinstance(node, ast.Call) and _constant_getattr(node) is not None:
        name = _dotted(node, aliases)
        _, attribute = _constant_getattr(node)
        if name in REACHING or attribute in REACHING_ATTRIBUTES:
            return [segment]
    return []


class FlagTampering(NbGraderPreprocessor):
    """Fail the test cells that come after a student's code which tampers with what grading relies
    on (see `tampering`), with a message saying so, and log the submission for the instructor.

    Code can always change what runs in its own kernel; this reads the submitted code, after it
    ran, for the evident ways of doing so. The instructor decides what it was."""

    def preprocess(self, nb: Any, resources: dict) -> tuple[Any, dict]:
        aliases: dict[str, str] = {}
        flagged: list[str] = []
        course = self._course_code(resources)
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            aliases.update(imports(cell.source))
            # The course's own cells (its demos may trace torch's functions) are not the student's.
            locked = cell.metadata.get("nbgrader", {}).get("locked", False) or cell.source.strip() in course
            if flagged and utils.is_grade(cell) and not utils.is_solution(cell):
                message = (
                    f"code before this test changes what grading relies on ({flagged[0]}), so this test "
                    "is not graded automatically: your instructor will look at the notebook."
                )
                cell.outputs = [new_output("error", ename="TamperingDetected", evalue=message, traceback=[])]
            elif not flagged:
                flagged = (tampering(cell.source, aliases) if not locked else []) or _caught_running(cell)
                if flagged:
                    student = resources.get("nbgrader", {}).get("student", "?")
                    self.log.warning(
                        "tampering detected in %s's notebook, cell %d: %s", student, index, "; ".join(flagged)
                    )
        return nb, resources

    def _course_code(self, resources: dict) -> set[str]:
        """The code cells of the notebook as the course released it (or as its source has it)."""
        from nbgrader.coursedir import CourseDirectory

        names = resources.get("nbgrader", {})
        coursedir = CourseDirectory(config=self.config)
        for step in (coursedir.release_directory, coursedir.source_directory):
            folder = Path(coursedir.format_path(step, ".", names.get("assignment", "")))
            path = folder / f"{names.get('notebook', '')}.ipynb"
            if path.is_file():
                released = nbformat.read(path, as_version=4)
                return {
                    c.source.strip() for c in released.cells if c.cell_type == "code" and c.source.strip()
                }
        return set()
