"""Demo cells: the course's cells that only show something, which grading need not run.

An instructor marks a code cell of a source notebook (solutions/) that only shows something (it
prints, plots, times, or draws a widget) and that no later cell needs, with the Jupyter cell tag
``demo``. A student sees it run while working; grading (`SandboxedExecute`, grading/execute.py)
gains nothing from running it, so it leaves out a submission's code cell when all of these hold:

- it is not an nbgrader cell (no solution, no test, not locked);
- its code is exactly that of a ``demo`` cell of the assignment's source notebook: the
  decision is the instructors', never the submission's own tags, and a demo a student edited runs;
- no later code cell of the submission reads, or deletes, a name it binds (assignments, loop,
  ``with`` and ``except`` targets, functions, classes, imports, ``global`` names), so an answer
  that happens to use a demo's variable still finds it. (A later cell that is itself left out
  reads nothing: a demo that only other demos read goes too.)

Which names a later cell reads is found by reading its code as Python scopes it: a function reads
the names it uses but does not bind itself; the cell itself reads a name it uses before binding
it on every path (``for name in ...: print(name)`` reads no ``name`` of the notebook's). Where
that cannot be told, every word of the cell counts as read: code that is not plain Python (an
IPython magic, a shell escape), and code that reaches names by other ways (``eval``,
``globals()``, frames, ``__main__``). A cell that reads the kernel's history (``_``, ``Out``,
``_5``) keeps every demo before it, whose outputs and numbering that history holds. A demo that
cannot be read so, or binds names in one of those ways, always runs.

What cannot be read from names, the instructors vouch for by marking a cell: that it changes no
state later cells rely on (seeds, environment variables, torch's settings, files, objects made
by earlier cells). The cell left out keeps its place; its output is one note that says why.
"""

from __future__ import annotations

import ast
import re
from functools import reduce
from pathlib import Path
from typing import Any

import nbformat

TAG = "demo"

NOTE = (
    "[Not run while grading: this cell only shows something (a demo), and no later cell needs it. "
    "It runs as usual when you work on the notebook.]\n"
)

IDENTIFIER = re.compile(r"(?!\d)\w+")
# Words of code that reaches the notebook's names other than by naming them.
DYNAMIC = frozenset(
    {
        *("eval", "exec", "globals", "locals", "vars", "dir", "get_ipython", "get_type_hints"),
        *("__main__", "__dict__", "__globals__", "__builtins__", "__import__"),
        *("inspect", "_getframe", "f_globals", "f_locals", "f_back"),
    }
)
# IPython's history of inputs and outputs, which a cell left out would change.
HISTORY = re.compile(r"_{1,3}|_i{1,3}|_i?\d+|In|Out|_ih|_oh|_dh")
EVERYTHING = "*"  # in a set of names read: every name (no identifier is spelled so)

SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def is_nbgrader_cell(cell: Any) -> bool:
    """Whether nbgrader grades, or locks, this cell (a solution, a test, or a locked cell)."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return any(bool(meta.get(key)) for key in ("solution", "grade", "locked"))


def is_demo(cell: Any) -> bool:
    """Whether this is a code cell the instructors marked as a demo (and not an nbgrader cell)."""
    tags = cell.get("metadata", {}).get("tags", [])
    return cell.get("cell_type") == "code" and TAG in tags and not is_nbgrader_cell(cell)


def demo_sources(source: Any) -> set[str]:
    """The code of the source notebook's demo cells."""
    return {cell.source for cell in source.cells if is_demo(cell)}


def source_notebook(config: Any, names: dict) -> Path | None:
    """The assignment's source notebook, from nbgrader's course directory and the assignment and
    notebook nbgrader is grading (``resources["nbgrader"]``); None if there is none."""
    from nbgrader.coursedir import CourseDirectory

    assignment, notebook = names.get("assignment"), names.get("notebook")
    if not assignment or not notebook:
        return None
    coursedir = CourseDirectory(config=config)
    folder = Path(coursedir.format_path(coursedir.source_directory, ".", assignment))
    path = folder / f"{notebook}.ipynb"
    return path if path.is_file() else None


def cells_to_skip(nb: Any, demos: set[str]) -> set[int]:
    """The indexes of the submission's code cells that grading leaves out (see the module)."""
    skipped: set[int] = set()
    later: set[str] = set()  # the names the code cells run after this one read
    for index in reversed(range(len(nb.cells))):
        cell = nb.cells[index]
        if cell.get("cell_type") != "code":
            continue
        code = cell.get("source", "")
        if EVERYTHING not in later and code.strip() and code in demos and not is_nbgrader_cell(cell):
            names = bound_names(code)
            if names is not None and not names & later:
                skipped.add(index)
                continue  # (what a cell left out would read, nothing needs)
        later |= read_names(code)
    return skipped


def not_run_note() -> Any:
    """The output a cell left out carries in the graded notebook."""
    return nbformat.v4.new_output("stream", name="stdout", text=NOTE)


# What a cell binds, and what it reads, in the notebook's namespace.


def _parse(code: str) -> ast.Module | None:
    """The cell's code as plain Python, or None where it is not (an IPython magic, say)."""
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):  # (a null byte; nesting too deep)
        return None


def _dynamic(code: str) -> bool:
    """Whether the code may reach the notebook's names other than by naming them."""
    return bool(set(IDENTIFIER.findall(code)) & DYNAMIC)


def bound_names(code: str) -> set[str] | None:
    """The names a cell's code binds, rebinds or deletes in the notebook's namespace; None when
    that cannot be told (not plain Python, names reached other ways, ``from module import *``)."""
    tree = _parse(code)
    names = None if tree is None or _dynamic(code) else _local_names([tree])
    if tree is None or names is None:
        return None
    # What a function declares global, it binds in the notebook's namespace when it runs.
    return names | {name for n in ast.walk(tree) if isinstance(n, ast.Global) for name in n.names}


def read_names(code: str) -> set[str]:
    """The names a cell's code may read, or delete, from the notebook's namespace: every word
    of it where that cannot be told, and every word of its strings where it may reach names
    other ways; `EVERYTHING` among them if it reads the kernel's history."""
    tree = _parse(code)
    if tree is None:
        names = set(IDENTIFIER.findall(code))
    else:
        names = set()
        _Reader(names).block(tree.body, set())
        if _dynamic(code):  # globals()["x"], eval("x"): the names are in its strings
            strings = [
                n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            ]
            names |= {word for text in strings for word in IDENTIFIER.findall(text)}
    return names | ({EVERYTHING} if any(HISTORY.fullmatch(name) for name in names) else set())


def _evaluated_outside(node: ast.AST) -> list[ast.AST]:
    """The parts of a scope evaluated where it is made: decorators, defaults, annotations, bases,
    a comprehension's first iterable."""
    if isinstance(node, COMPREHENSIONS):
        return [node.generators[0].iter]
    parts: list[Any] = list(getattr(node, "decorator_list", []))
    if isinstance(node, ast.ClassDef):
        return parts + node.bases + [k.value for k in node.keywords]
    args = node.args
    parts += args.defaults + [d for d in args.kw_defaults if d is not None]
    every = args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]
    parts += [a.annotation for a in every if a.annotation is not None]
    return parts + ([node.returns] if getattr(node, "returns", None) is not None else [])


def _scope_reads(node: ast.AST) -> set[str]:
    """The names a function, lambda, class body or comprehension reads from around it (from the
    notebook's namespace, when it is made there), whenever it runs."""
    if isinstance(node, COMPREHENSIONS):
        own = {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        inside: list[ast.AST] = [g.target for g in node.generators] + [g.iter for g in node.generators[1:]]
        inside += [condition for g in node.generators for condition in g.ifs]
        inside += [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        return (_names_used(*inside) - own) | _names_used(node.generators[0].iter)
    body = node.body if isinstance(node.body, list) else [node.body]
    declared = {name for n in _own_nodes(*body) if isinstance(n, ast.Global) for name in n.names}
    used = _names_used(*body)
    if isinstance(node, ast.ClassDef):  # a class body looks its names up in the namespace too
        return used | declared
    args = node.args
    every = args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]
    own = {a.arg for a in every} | ((_local_names(body) or set()) - declared)
    return (used - own) | declared


def _own_nodes(*nodes: ast.AST) -> list[ast.AST]:
    """The nodes of one scope's code: these nodes and what they hold, the scopes inside them
    (functions, lambdas, classes, comprehensions) included, but not what those hold."""
    found, pending = [], list(nodes)
    while pending:
        current = pending.pop()
        found.append(current)
        if not isinstance(current, SCOPES + COMPREHENSIONS):
            pending += list(ast.iter_child_nodes(current))
    return found


def _local_names(nodes: list[ast.AST]) -> set[str] | None:
    """The names this code binds in its own scope: a function's locals, or a cell's names in the
    notebook's namespace; None for ``from module import *``."""
    names: set[str] = set()
    for part in _own_nodes(*nodes):
        if isinstance(part, (ast.Import, ast.ImportFrom)):
            if any(alias.name == "*" for alias in part.names):
                return None
            names |= {alias.asname or alias.name.split(".")[0] for alias in part.names}
        elif isinstance(part, ast.Name) and not isinstance(part.ctx, ast.Load):
            names.add(part.id)  # assignments of every kind, for and with targets, walrus, del
        elif isinstance(part, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and part.name:
            names.add(part.name)
        elif isinstance(part, ast.MatchMapping) and part.rest:
            names.add(part.rest)
        elif isinstance(part, (ast.Global, ast.Nonlocal)):
            names |= set(part.names)
        elif isinstance(part, SCOPES + COMPREHENSIONS):
            # Around a scope: its name, what its defaults bind, and a comprehension's walrus targets.
            outside = _local_names(_evaluated_outside(part))
            if outside is None:
                return None
            names |= outside | ({part.name} if isinstance(part, SCOPES[:2] + (ast.ClassDef,)) else set())
            names |= _walrus_targets(part) if isinstance(part, COMPREHENSIONS) else set()
    return names


def _walrus_targets(comprehension: ast.AST) -> set[str]:
    """What a comprehension's ``:=`` binds: a name of the scope around it (through comprehensions
    inside it too)."""
    found: set[str] = set()
    for part in _own_nodes(*ast.iter_child_nodes(comprehension)):
        if isinstance(part, ast.NamedExpr) and isinstance(part.target, ast.Name):
            found.add(part.target.id)
        elif isinstance(part, COMPREHENSIONS):
            found |= _walrus_targets(part)
    return found


def _names_used(*nodes: ast.AST) -> set[str]:
    """The names these parts of one scope use (read or delete), with what the scopes inside them
    read from it."""
    used: set[str] = set()
    for part in _own_nodes(*nodes):
        if isinstance(part, ast.Name) and not isinstance(part.ctx, ast.Store):
            used.add(part.id)
        elif isinstance(part, ast.AugAssign) and isinstance(part.target, ast.Name):
            used.add(part.target.id)
        elif isinstance(part, SCOPES + COMPREHENSIONS):
            used |= _scope_reads(part) | _names_used(*_evaluated_outside(part))
    return used


class _Reader:
    """Reads a cell's statements in order, keeping the names bound on every path so far: a use
    of any other name reads the notebook's namespace."""

    def __init__(self, reads: set[str]) -> None:
        self.reads = reads

    def block(self, statements: list[ast.stmt], bound: set[str]) -> set[str]:
        bound = set(bound)
        for statement in statements:
            bound = self.statement(statement, bound)
        return bound

    def use(self, node: ast.AST | None, bound: set[str]) -> None:
        if node is not None:
            self.reads.update(_names_used(node) - bound)

    def bind(self, target: ast.AST, bound: set[str]) -> None:
        if isinstance(target, ast.Name):
            bound.add(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.bind(element, bound)
        elif isinstance(target, ast.Starred):
            self.bind(target.value, bound)
        else:  # x.attribute = ..., x[i] = ...: reads x
            self.use(target, bound)

    def statement(self, s: ast.stmt, bound: set[str]) -> set[str]:
        if isinstance(s, ast.Assign):
            self.use(s.value, bound)
            for target in s.targets:
                self.bind(target, bound)
        elif isinstance(s, (ast.AugAssign, ast.AnnAssign)):
            self.use(s.annotation if isinstance(s, ast.AnnAssign) else s, bound)
            if s.value is not None:
                self.use(s.value, bound)
                self.bind(s.target, bound)
            elif not isinstance(s.target, ast.Name):
                self.use(s.target, bound)
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            self.use(s.iter, bound)
            inside = set(bound)
            self.bind(s.target, inside)
            self.block(s.body, inside)
            self.block(s.orelse, bound)  # (after no turn of the loop, its target is unbound)
        elif isinstance(s, ast.While):
            self.use(s.test, bound)
            self.block(s.body, bound)
            self.block(s.orelse, bound)
        elif isinstance(s, ast.If):
            self.use(s.test, bound)
            bound = self.block(s.body, bound) & self.block(s.orelse, bound)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                self.use(item.context_expr, bound)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, bound)
            self.block(s.body, bound)  # (a context manager may swallow an error half-way)
        elif isinstance(s, ast.Try):
            done = [self.block(s.orelse, self.block(s.body, bound))]
            for handler in s.handlers:
                self.use(handler.type, bound)
                caught = bound | ({handler.name} if handler.name else set())
                done.append(self.block(handler.body, caught) - {handler.name})
            bound = self.block(s.finalbody, bound) | reduce(set.__and__, done)
        elif isinstance(s, SCOPES):
            self.reads.update(_scope_reads(s) - bound)
            for part in _evaluated_outside(s):
                self.use(part, bound)
            bound.add(s.name)
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            bound |= {alias.asname or alias.name.split(".")[0] for alias in s.names}
        elif isinstance(s, ast.Delete):
            self.use(s, set())
            bound -= {n.id for n in ast.walk(s) if isinstance(n, ast.Name)}
        elif isinstance(s, (ast.Expr, ast.Assert, ast.Raise, ast.Return)):
            self.use(s, bound)
        elif not isinstance(s, (ast.Pass, ast.Break, ast.Continue, ast.Global, ast.Nonlocal)):
            # match, try*, and what later Pythons add: every name in it is read, none bound
            self.reads.update(n.id for n in ast.walk(s) if isinstance(n, ast.Name))
        return bound
