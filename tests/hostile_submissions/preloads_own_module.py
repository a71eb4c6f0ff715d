"""A wrong answer, after asking the launcher's fork server to import a module of its own, which
would change every rank's checks before the rank's guard notes them: when grading, the server
imports only the course's and torch's modules, so the ranks check the wrong answer as wrong.

answer: wrong
class: ranks
expect: second fails: expected 2, got 0
"""

import pathlib

import launcher
import launcher.forkserver

pathlib.Path("helper_of_mine.py").write_text(
    "import autograder.checks.expect as e\ne.same_value = lambda actual, expected: True\n"
)
launcher.forkserver._preloaded.append("helper_of_mine")
launcher.preload("helper_of_mine")
