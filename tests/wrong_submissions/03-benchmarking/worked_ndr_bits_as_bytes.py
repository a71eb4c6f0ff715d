"""Reads NDR's 400 Gb/s as 400 GB/s.

replaces: worked
fails: test_worked_flat test_worked_two_level test_worked_below
says: read 400 Gb/s as 400 GB/s
"""

ndr = 400e9  # should be 400e9 / 8 bytes per second
flat_seconds = 2 * 31 * (3e-6 + 14e9 / (32 * ndr))
two_level_seconds = 2 * 7 * (2e-6 + 14e9 / (8 * 450e9)) + 2 * 3 * (3e-6 + 14e9 / 8 / (4 * ndr))
two_level_below = (62 * 3e-6 - 14 * 2e-6 - 6 * 3e-6) / (14 / 3.6e12 + 6 / (32 * ndr) - 62 / (256 * ndr))
