"""Reads NDR's 400 Gb/s as 400 GB/s.

replaces: worked
fails: test_worked_seconds test_worked_tokens
says: read 400 Gb/s as 400 GB/s
"""

seconds_on_64 = 2 * 63 / 64 * 7e9 * 2 / 8 / 400e9
tokens_to_hide_it = seconds_on_64 * 0.5 * 989e12 / (4 * 7e9)
