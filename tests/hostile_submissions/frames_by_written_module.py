"""A wrong answer that writes a module to disk and imports it, so that the code taking the test's
frame lies in no notebook cell's file: the guard refuses it to any code not the course's.

answer: none
expect: second fails: TamperingRefused
"""

import importlib
import pathlib
import sys

pathlib.Path("spy_module.py").write_text("import sys\n\ndef caller():\n    return sys._getframe(2)\n")
sys.path.insert(0, ".")
spy_module = importlib.import_module("spy_module")


def second():
    getattr(spy_module.caller(), "f_" + "globals")["expect_equal"] = lambda *args, **kwargs: None
    return 0
