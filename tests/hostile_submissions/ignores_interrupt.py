"""Ignores SIGINT and hangs, so that interrupting the cell does nothing.

expect: second fails: did not stop when interrupted
"""

import signal

signal.signal(signal.SIGINT, signal.SIG_IGN)
while True:
    pass
