"""Forgets Adam's fp32 master copy of the parameters.

replaces: worked
fails: test_worked_memory
"""

memory_gb = (2 + 2 + 4 + 4) * 7e9 / 1e9
