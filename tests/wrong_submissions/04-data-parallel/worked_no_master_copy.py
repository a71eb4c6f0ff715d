"""Forgets Adam's fp32 master copy of the parameters: 12 bytes per parameter, not 16.

replaces: worked
fails: test_worked_memory
says: forget the fp32 master copy
"""

largest_params = 80e9 / (2 + 2 + 4 + 4)
