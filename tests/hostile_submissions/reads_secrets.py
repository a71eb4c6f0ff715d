"""Prints the hidden tests, the solutions and the grader's environment into its notebook.

expect: full
"""

import glob
import os

for path in glob.glob(f"{COURSE}/**/*.ipynb", recursive=True) + glob.glob(f"{COURSE}/*"):
    try:
        with open(path) as f:
            print(path, f.read())
    except OSError:
        pass
print(dict(os.environ))
