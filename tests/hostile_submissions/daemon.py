"""A daemon in a session of its own, started to outlive grading.

expect: full
"""

import subprocess
import sys

subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(3600)", MARKER],
    start_new_session=True,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
)
