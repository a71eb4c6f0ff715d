"""A wrong answer that has the standard library's debugger framework trace the test, catching its
frames as they are called: the guard refuses the tracing.

answer: none
expect: second fails: TamperingRefused
"""

import bdb


class Spy(bdb.Bdb):
    def user_call(self, frame, argument_list):
        getattr(frame, "f_" + "globals")["expect_equal"] = lambda *args, **kwargs: None

    def user_line(self, frame):
        self.set_continue()


def second():
    Spy().set_trace()
    return 0
