"""Stops its own kernel with SIGSTOP, so that nothing it is sent would ever be answered. The
kernel is its sandbox's first process, which signals from inside the sandbox do not reach.

expect: full
"""

import os
import signal

os.kill(os.getpid(), signal.SIGSTOP)
