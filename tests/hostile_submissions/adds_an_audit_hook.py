"""A wrong answer, after adding an audit hook of its own, which would run right after the guard's
and could undo a change around each of the guard's looks: the hook is refused, and flagged.

answer: wrong
expect: second fails: TamperingDetected
"""

import sys


def watcher(event, args):
    if event == "exec":
        print("the guard looks now")


sys.addaudithook(watcher)
