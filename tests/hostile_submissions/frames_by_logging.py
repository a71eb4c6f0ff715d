"""A wrong answer that takes the test's frame from the standard library's logging, which hands its
caller a frame on its behalf, and overwrites what the test compares with: the guard refuses it.

answer: none
expect: second fails: TamperingRefused
"""

import logging


def second():
    frame = logging.currentframe()
    caller = getattr(frame, "f_" + "back")
    getattr(caller, "f_" + "globals")["expect_equal"] = lambda *args, **kwargs: None
    return 0
