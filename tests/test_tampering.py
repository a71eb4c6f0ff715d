"""Tampering with what grading relies on is found in the submitted code (grading/preprocessors.py),
and correct code is never taken for it. The grading round trip grades a tampering submission."""

from __future__ import annotations

import subprocess
import sys

import nbformat
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
    # the same, reworded
    "getattr(sys, '_getframe')(1)",
    "import inspect\ncur = inspect.currentframe\ncur()",
    "vars(torch)['equal'] = print",
    "torch.__dict__['equal'] = print",
    "def f():\n    pass\nf.__closure__",
    "try:\n    1 / 0\nexcept Exception as e:\n    e.__traceback__.tb_frame.f_back",
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
    "getattr(torch, 'float32')",
    "settings = vars(args)",
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


# -- the guard: what code does, however it is spelled (launcher/guard.py) -------------------------

GUARDED_RANKS = '''
import sys
from launcher import guard, launch

guard.install("autograder")
cell = """
import sys, torch
import torch.distributed as dist


def honest(rank, world_size):
    t = torch.ones(3) * rank
    dist.all_reduce(t)
    return t.sum().item()


def reads_frames(rank, world_size):
    return getattr(sys, "_get" + "frame")(1).f_code.co_name


def patches(rank, world_size):
    exec("import torch; torch.equal = lambda a, b: True")
    return 0
"""
names = {}
exec(compile(cell, "/tmp/ipykernel_7/123.py", "exec"), names)  # a notebook cell's file
print("honest", launch(names["honest"], 2))
for name in ("reads_frames", "patches"):
    try:
        launch(names[name], 2)
    except Exception as error:
        print(name, str(error).splitlines()[0])
'''


def test_the_guard_refuses_reaching_code_and_finds_changes_in_every_rank() -> None:
    # (In a process of its own: an audit hook, once added, stays for the process's life.)
    done = subprocess.run(
        [sys.executable, "-c", GUARDED_RANKS], capture_output=True, text=True, timeout=300, cwd=REPO
    )
    lines = done.stdout.splitlines()
    assert lines[0] == "honest [3.0, 3.0]", done.stdout + done.stderr
    assert "raised TamperingRefused: grading refuses sys._getframe" in lines[1], lines
    assert "raised TamperingDetected" in lines[2] and "(torch.equal)" in lines[2], lines


GUARDED_CELLS = [
    ("!echo shell escapes are honest", "shell escapes are honest"),
    ("files = !ls /\nprint(len(files) > 0)", "True"),
    ("%time x = 1", "Wall time"),
    ("import inspect\ncur = inspect.currentframe\ncur()", "TamperingRefused"),
    ("import sys\ngetattr(sys, '_getframe')(0)", "TamperingRefused"),
    ("try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    e.__traceback__.tb_frame", "TamperingRefused"),
    ("import gc\nlen(gc.get_objects())", "TamperingRefused"),
    ("print('nothing changed yet')", "nothing changed yet"),
    # The launch a check runs its ranks with, replaced by one that forges their results:
    ("import autograder.collectives.cases as c\nvars(c)['launch'] = lambda *args, **kwargs: []", ""),
    (
        "print('after')",
        "TamperingDetected: code run before this cell changed what grading relies on "
        "(autograder.collectives.cases.launch)",
    ),
]


def test_a_grading_kernel_is_guarded_from_its_first_cell() -> None:
    from nbclient import NotebookClient

    from grading.sandbox import CourseKernelManager

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code) for code, _ in GUARDED_CELLS])
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    # (A manager of its own making, which the client shuts down with its kernel when done.)
    client = NotebookClient(nb, kernel_manager_class=CourseKernelManager, allow_errors=True, timeout=120)
    client.execute(cwd=str(REPO))
    for cell, (code, expected) in zip(nb.cells, GUARDED_CELLS, strict=True):
        said = " ".join(
            output.get("text", "") + f"{output.get('ename', '')}: {output.get('evalue', '')}"
            for output in cell.outputs
        )
        if expected:
            assert expected in said, (code, said)
        else:
            assert "Tampering" not in said, (code, said)


def test_shell_escapes_and_magics_are_never_taken_for_tampering() -> None:
    for code in ("!nvidia-smi", "x = !ls", "!pip install tqdm", "%env OMP_NUM_THREADS=1", "%%capture\nx = 1"):
        assert tampering(code, imports(SETUP)) == [], code
