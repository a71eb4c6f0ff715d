"""A blank answer, after replacing how the kernel runs a cell with code that runs nothing and
reports success, and how it evaluates the grader's user expressions with code that evaluates
none: every test after it would then show no error, and so score full marks. The guard's proof
that each test cell ran (a keyed hash only the grader and the guard can make) does not come
back, so those tests score nothing.

answer: none
expect: second fails: could not be proven
"""

import IPython
from IPython.core.interactiveshell import ExecutionInfo, ExecutionResult

shell = IPython.get_ipython()


def run_cell(raw_cell, *args, **kwargs):
    return ExecutionResult(ExecutionInfo(raw_cell, False, False, True, None))


async def run_cell_async(raw_cell, *args, **kwargs):
    return run_cell(raw_cell)


shell.run_cell = run_cell
shell.run_cell_async = run_cell_async
shell.should_run_async = lambda *args, **kwargs: False
shell.user_expressions = lambda expressions: {}
