"""A fork bomb: every process forks for ever, and forks that fail are retried.

expect: second fails: processes
"""

import os

while True:
    try:
        os.fork()
    except OSError:
        pass
