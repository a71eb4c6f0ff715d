"""A wrong answer that reaches into the test's frame to overwrite what it compares with, the
frame taken through a name no reading of the code can see: the guard refuses it.

answer: none
expect: second fails: TamperingRefused
"""

import sys


def second():
    caller = getattr(sys, "_get" + "frame")(1)
    getattr(caller, "f_" + "globals")["expect_equal"] = lambda *args, **kwargs: None
    return 0
