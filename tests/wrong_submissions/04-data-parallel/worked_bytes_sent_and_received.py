"""Counts the bytes each GPU receives as well as those it sends.

replaces: worked
fails: test_worked_bytes
says: count the bytes each GPU receives as well as those it sends
"""

bytes_per_gpu = 2 * (2 * (8 - 1) / 8 * 13e9 * 2)
