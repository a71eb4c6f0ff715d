"""A wrong answer, after adding to the module constants the checks consult: the tensor types they
compare, and the collectives a communication log counts. Neither replaces a function.

answer: wrong
expect: second fails: TamperingDetected
"""

exec(
    "import autograder.checks.expect as e\n"
    "import autograder.comm as c\n"
    "e.PLAIN_TENSORS = (*e.PLAIN_TENSORS, object)\n"
    "c._COLLECTIVE_NAMES.pop('allgather_')"
)
