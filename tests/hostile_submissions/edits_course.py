"""Edits the course's own checks so that every later test passes, for everyone.

expect: full
"""

import autograder.checks

try:
    with open(autograder.checks.__file__, "a") as f:
        f.write(f"\n# {MARKER}\ndef expect_equal(*args, **kwargs):\n    pass\n")
except OSError:
    pass
