"""Tampering with what grading relies on is found in the submitted code (grading/preprocessors.py),
and correct code is never taken for it. The grading round trip grades a tampering submission."""

from __future__ import annotations

import pytest
from course import ASSIGNMENTS, REPO, is_solution, is_test, notebook_path, read, solution_code, submission
from test_wrong_submissions import OTHERS
from traitlets.config import Config

from grading.preprocessors import FlagTampering, imports, imports_in, tampering

SETUP = (
    "import sys\nimport torch\nimport torch.distributed as dist\nfrom torch import nn\nimport numpy as np\n"
)

TAMPERING = [
    "torch.allclose = lambda *args, **kwargs: True",
    "from autograder import checks\nchecks.fail = print",
    "import autograder.checks as c\nc.allclose = None",
    "sys.modules['autograder.checks'] = type(sys)('fake')",
    "sys.modules.pop('torch')",
    "import builtins\nbuiltins.isinstance = lambda *args: True",
    "__builtins__.print = None",
    "get_ipython().showtraceback = lambda *args, **kwargs: None",
    "shell = get_ipython()\nshell.input_transformers_post.append(str)",
    "frame = sys._getframe(1)",
    "import launcher\nsetattr(launcher, 'launch', print)",
    "%time torch.equal = lambda a, b: True",
    "dist.ProcessGroup.send = print",
    "nn.Module.__call__ = print",
    "np.allclose = print",
    "import ctypes",
    "import gc\nfor thing in gc.get_objects():\n    pass",
    "sys.meta_path.insert(0, object())",
]

HONEST = [
    "torch.backends.cudnn.benchmark = True",
    "%matplotlib inline\nx = 1",
    "class A:\n    def __init__(self):\n        setattr(self, 'w', 1)",
    "model = nn.Linear(2, 2)\nmodel.weight.grad = None",
    "x = torch.zeros(3)\nx[0] = 1",
    "import os\nos.environ['OMP_NUM_THREADS'] = '1'",
    "%timeit torch.ones(3)",
    "def f(x:\n    pass",  # a syntax error: the kernel cannot run it either
    "sys.modules['nbgrader'] = None",  # blocking an import can only make tests fail
]


@pytest.mark.parametrize("code", TAMPERING)
def test_tampering_is_found(code: str) -> None:
    assert tampering(code, imports(SETUP + code)), code


@pytest.mark.parametrize("code", HONEST)
def test_ordinary_code_is_not_taken_for_tampering(code: str) -> None:
    assert tampering(code, imports(SETUP)) == []


def test_no_solution_and_no_other_correct_answer_is_taken_for_tampering() -> None:
    for assignment in ASSIGNMENTS:
        cells = read(notebook_path("solutions", assignment)).cells
        aliases = imports_in(cells)
        for cell in cells:
            if is_solution(cell):
                assert tampering(cell.source, aliases) == [], (assignment, cell.source[:200])
        for other in (o for o in OTHERS if o.assignment == assignment):
            assert tampering(other.code, {**aliases, **imports(other.code)}) == [], other.name


def flagged_tests(assignment: str, extra: str = "") -> list[str]:
    """The test cells FlagTampering fails in a solved notebook (``extra`` added to its first answer)."""
    release = read(notebook_path("notebooks", assignment))
    code = solution_code(read(notebook_path("solutions", assignment)))
    first = next(iter(code))
    notebook = submission(release, {**code, first: code[first] + extra})
    config = Config()
    config.CourseDirectory.root = str(REPO)
    config.CourseDirectory.release_directory = "notebooks"
    names = {
        "assignment": assignment,
        "notebook": notebook_path("notebooks", assignment).stem,
        "student": "s",
    }
    FlagTampering(config=config).preprocess(notebook, {"nbgrader": names})
    return [c.metadata["nbgrader"]["grade_id"] for c in notebook.cells if is_test(c) and c.get("outputs")]


def test_the_course_s_own_cells_are_not_the_student_s() -> None:
    # Notebook 04's demo traces dist.all_reduce by replacing it: the course's code, not a student's.
    assert flagged_tests("04-data-parallel") == []
    every_test = [
        c.metadata["nbgrader"]["grade_id"]
        for c in read(notebook_path("notebooks", "04-data-parallel")).cells
        if is_test(c)
    ]
    assert flagged_tests("04-data-parallel", "\nimport torch\ntorch.equal = print\n") == every_test
