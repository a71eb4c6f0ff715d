"""A wrong answer, after widening the tolerance of a check by its keyword default, which replaces no
function: the guard notes defaults too.

answer: wrong
expect: second fails: TamperingDetected
"""

exec("import autograder.checks.expect as e\ne.expect_close.__kwdefaults__['rel'] = 10.0")
