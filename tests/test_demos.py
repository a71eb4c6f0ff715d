"""Grading leaves out the cells that only show something (grading/demos.py): which cells, for a
small made-up source notebook and the submissions made from it; and the names a cell binds and
reads, as the decision reads them. No kernel starts: nbclient's part is stood in for."""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat
import pytest
from nbgrader.preprocessors import Execute
from traitlets.config import Config

from grading import demos
from grading.execute import SandboxedExecute

ASSIGNMENT, NOTEBOOK = "ps1", "lesson"

SETUP = "import math"
DEMO = 'for name in ("a", "b"):\n    print(name, math.pi)'
PLOT = "points = [1, 2]\nprint(sum(points))"
ANSWER = "def area(r):\n    return math.pi * r * r"
TEST = "assert area(1) == math.pi"


def cell(source: str, tags: tuple[str, ...] = (), **nbgrader: object) -> nbformat.NotebookNode:
    made = nbformat.v4.new_code_cell(source)
    if tags:
        made.metadata["tags"] = list(tags)
    if nbgrader:
        made.metadata["nbgrader"] = {"schema_version": 3, "grade": False, "solution": False, **nbgrader}
    return made


def source_notebook() -> nbformat.NotebookNode:
    """Set-up, two demos, an exercise and its test; the demos as the instructors tagged them."""
    return nbformat.v4.new_notebook(
        cells=[
            cell(SETUP, locked=True, grade_id="setup"),
            cell(DEMO, ("demo",)),
            nbformat.v4.new_markdown_cell("Write `area`."),
            cell(ANSWER, solution=True, grade_id="area"),
            cell(PLOT, ("demo",)),
            cell(TEST, grade=True, locked=True, grade_id="test_area", points=1),
        ]
    )


def skipped(submission: nbformat.NotebookNode, source: nbformat.NotebookNode | None = None) -> set[int]:
    return demos.cells_to_skip(submission, demos.demo_sources(source or source_notebook()))


def test_an_untouched_demo_is_left_out() -> None:
    assert skipped(source_notebook()) == {1, 4}


def test_a_submissions_tags_and_edits_decide_nothing() -> None:
    submission = source_notebook()
    submission.cells[1].source = DEMO.replace("pi", "e")  # an edited demo runs
    submission.cells[5].metadata["tags"] = ["demo"]  # a test cell the student tagged runs
    submission.cells.insert(3, cell("print('mine')", ("demo",)))  # so does the student's own demo
    del submission.cells[5].metadata["tags"]  # an untouched demo goes, whatever its tags say
    assert skipped(submission) == {5}
    # A test cell with a demo's code, even tagged so in the source, is an nbgrader cell: it runs.
    source = source_notebook()
    source.cells[5].metadata["tags"] = ["demo"]
    assert 5 not in skipped(source_notebook(), source)


def test_a_demo_runs_when_a_later_cell_reads_what_it_binds() -> None:
    submission = source_notebook()
    submission.cells[3].source = ANSWER + "\n\n\nprint(name)"  # the answer uses the demo's name
    assert skipped(submission) == {4}
    submission.cells[3].source = ANSWER + "\n\n\nfor name in 'xy':\n    print(name)"  # binds it first
    assert skipped(submission) == {1, 4}
    submission.cells[3].source = ANSWER + "\n\n\ndef f():\n    return name"  # reads it when called
    assert skipped(submission) == {4}
    submission.cells.append(cell("print(len(points))"))  # a cell of the student's own, at the end
    assert skipped(submission) == set()


def test_a_demo_that_only_a_demo_left_out_reads_is_left_out_too() -> None:
    source = source_notebook()
    source.cells.insert(5, cell("print(points)", ("demo",)))
    assert skipped(source, source) == {1, 4, 5}
    edited = copy.deepcopy(source)
    edited.cells[5].source = "print(points, 2)"  # the reader now runs: what it reads is made
    assert skipped(edited, source) == {1}


def grade(submission: nbformat.NotebookNode, root: Path, monkeypatch, **options: object) -> list[int]:
    """The cells SandboxedExecute runs of this submission (nbgrader's execution stood in for)."""
    ran: list[int] = []

    def run_cells(self, nb, resources=None, km=None):
        self.nb, self.resources = nb, resources
        for index, one in enumerate(nb.cells):
            self.preprocess_cell(one, resources, index)
        return nb, resources

    def run_cell(self, one, resources, index):
        if one.cell_type == "code":
            ran.append(index)
            one.execution_count, one.outputs = len(ran), []
        return one, resources

    monkeypatch.setattr(Execute, "preprocess", run_cells)
    monkeypatch.setattr(Execute, "preprocess_cell", run_cell)
    config = Config()
    config.CourseDirectory.root = str(root)
    config.CourseDirectory.source_directory = "solutions"
    grader = SandboxedExecute(config=config, sandbox=False, guard=False, **options)
    names = {"assignment": ASSIGNMENT, "notebook": NOTEBOOK, "student": "someone"}
    grader.preprocess(submission, {"nbgrader": names})
    return ran


def test_grading_leaves_demos_out_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "solutions" / ASSIGNMENT).mkdir(parents=True)
    nbformat.write(source_notebook(), tmp_path / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    submission = source_notebook()
    assert grade(submission, tmp_path, monkeypatch) == [0, 3, 5]
    for index in (1, 4):
        (note,) = submission.cells[index].outputs
        assert note.output_type == "stream" and note.text == demos.NOTE
        assert "Not run while grading" in note.text and "when you work on the notebook" in note.text
        assert submission.cells[index].execution_count is None
    # Turned off, every cell runs.
    assert grade(source_notebook(), tmp_path, monkeypatch, skip_demos=False) == [0, 1, 3, 4, 5]


def test_without_a_source_notebook_every_cell_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert grade(source_notebook(), tmp_path, monkeypatch) == [0, 1, 3, 4, 5]
    assert demos.source_notebook(Config(), {}) is None  # (the check before grading names none)


@pytest.mark.parametrize(
    ("code", "names"),
    [
        ("x = 1\ny += 2\nz: int = 3", {"x", "y", "z"}),
        ("for i, (a, *b) in x:\n    pass\nwith f() as (g, h):\n    pass", {"i", "a", "b", "g", "h"}),
        ("try:\n    pass\nexcept E as err:\n    pass\ndel q", {"err", "q"}),
        ("import os.path, numpy as np\nfrom m import k as kk, j", {"os", "np", "kk", "j"}),
        ("def f(p=(d := 1)):\n    local = 2\n    global g\n\n\nclass C:\n    attr = 1", {"f", "d", "g", "C"}),
        ("[v for v in range(3) if (w := v)]\n(lambda u: u)(1)\nprint(1)", {"w"}),
        ("from m import *", None),
        ("globals()['x'] = 1", None),
        ("%time x = 1", None),
    ],
)
def test_what_a_cell_binds(code: str, names: set[str] | None) -> None:
    assert demos.bound_names(code) == names


@pytest.mark.parametrize(
    ("code", "reads", "not_reads"),
    [
        ("print(a)\nb = 1\nprint(b)", {"a", "print"}, {"b"}),
        ("for name in x:\n    print(name)\nprint(name)", {"x", "name"}, set()),
        ("for name in x:\n    print(name)", {"x"}, {"name"}),
        ("if c:\n    v = 1\nelse:\n    v = 2\nprint(v)", {"c"}, {"v"}),
        ("if c:\n    v = 1\nprint(v)", {"c", "v"}, set()),
        ("def f(a):\n    b = a\n    return b + g", {"g"}, {"a", "b", "f"}),
        ("def f():\n    global s\n    s = 1", {"s"}, set()),
        ("def f():\n    def g():\n        return n\n    n = 1\n    return g", set(), {"n"}),
        ("total = sum(x * k for x in data)", {"data", "k", "sum"}, {"x"}),
        ("class C:\n    size = n\n    def m(self):\n        return size", {"n", "size"}, set()),
        ("y += 1", {"y"}, set()),
        ("obj.attr = 1\nitems[0] = 2", {"obj", "items"}, set()),
        ("del z", {"z"}, set()),
        ("try:\n    t = f()\nexcept E:\n    t = 0\nprint(t)", {"f", "E"}, {"t"}),
        ("with open(p) as fh:\n    fh.read()", {"open", "p"}, {"fh"}),
        ("f = lambda: later\nlater = 1", {"later"}, set()),
    ],
)
def test_what_a_cell_reads(code: str, reads: set[str], not_reads: set[str]) -> None:
    found = demos.read_names(code)
    assert reads <= found and not (not_reads & found), found


def test_a_cell_that_reads_names_other_ways_reads_every_word_it_may() -> None:
    # Names by strings: every word of its strings counts; not plain Python: every word of it.
    assert "nvlink_seconds" in demos.read_names("for k in ('nvlink_seconds',):\n    print(globals()[k])")
    assert {"bandwidth", "x"} <= demos.read_names("eval('x * bandwidth')")
    assert {"points", "time"} <= demos.read_names("%time print(points)")
    assert "points" in demos.read_names("print(points)\0")  # (Python cannot parse it either)
    # The kernel's history: a demo left out would change what it holds, so every demo before runs.
    assert demos.EVERYTHING in demos.read_names("print(_)")
    assert demos.EVERYTHING in demos.read_names("Out[3]")
    assert demos.EVERYTHING not in demos.read_names("for _ in range(2):\n    pass")
    source = source_notebook()
    source.cells.insert(5, cell("print(_)"))
    assert skipped(source, source) == set()
