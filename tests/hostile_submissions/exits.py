"""Ends its own kernel halfway through the notebook.

expect: second fails: kernel died
"""

import os

os._exit(3)
