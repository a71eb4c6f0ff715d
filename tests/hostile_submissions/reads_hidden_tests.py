"""The right answer, whose function, each time a test calls it, prints every place IPython and the
kernel keep the code they run (``In``, the output cache, the history, the line cache, the request
being run) and the notebook's variables: none holds a hidden test, so it keeps every point.

answer: none
expect: full
"""

import linecache
import sys

import IPython


def second():
    shell = IPython.get_ipython()
    print("In:", In, "Out:", Out)
    print("history:", list(shell.history_manager.input_hist_raw))
    cached = [line for lines in list(linecache.cache.values()) if len(lines) > 2 for line in lines[2] or ()]
    print("line cache:", [line for line in cached if "assert" in line or "hidden" in line])
    print("request:", shell.kernel.get_parent("shell"))
    print("variables:", sorted(vars(sys.modules["__main__"])))
    return 2
