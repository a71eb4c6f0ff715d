"""The right answer, whose function runs the grader's hidden tests itself, to learn from them before
the test cell does: the test cell's own hidden tests are then gone, and the notebook is flagged.

answer: none
expect: second fails: TamperingDetected
"""

import launcher.hidden_tests


def second():
    try:
        launcher.hidden_tests.run()
    except BaseException as error:
        print("learnt:", error)
    return 2
