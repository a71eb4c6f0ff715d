"""The right answer, after stopping the launcher's fork server and pointing Python at a
``sitecustomize`` of its own, so that the next server would start with every rank's checks
changed before their guard notes them: grading starts the server once only, so the ranks'
test fails, and nothing else is affected.

class: ranks
expect: ranks fails: grading starts it only once
"""

import os
import pathlib

import launcher

launcher.launch(lambda rank, world_size: None, 1)
launcher.shutdown()
site = pathlib.Path("site_of_my_own")
site.mkdir(exist_ok=True)
(site / "sitecustomize.py").write_text(
    "import autograder.checks.expect as e\ne.same_value = lambda actual, expected: True\n"
)
os.environ["PYTHONPATH"] = f"{site.resolve()}:{os.environ.get('PYTHONPATH', '')}"
