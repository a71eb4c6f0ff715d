"""Counts the 13B model's gradients at 4 bytes each, as if they were fp32.

replaces: worked
fails: test_worked_bytes
says: 4 bytes per bf16 gradient
"""

bytes_per_gpu = 2 * 7 / 8 * 13e9 * 4
