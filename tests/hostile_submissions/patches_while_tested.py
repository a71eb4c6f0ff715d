"""A wrong answer whose function, when the test calls it, turns the checks' failures off, spelled
so that no reading of the code can tell: the guard finds the change as soon as the test ends.

answer: none
expect: second fails: TamperingDetected
"""


def second():
    exec("import autograder.checks.expect as e\ne.fail = lambda message: None")
    return 0
