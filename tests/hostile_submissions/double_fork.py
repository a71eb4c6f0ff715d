"""A classic Unix daemon: fork, setsid, fork again, and loop in the grandchild.

expect: full
"""

import os
import time

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sh", ["sh", "-c", f"while true; do sleep 1; done # {MARKER}"])
    os._exit(0)
time.sleep(0.2)
