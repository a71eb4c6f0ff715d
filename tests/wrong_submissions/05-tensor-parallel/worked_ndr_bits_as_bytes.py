"""Reads NDR's 400 Gb/s as 400 GB/s.

replaces: worked
fails: test_worked_ndr test_worked_overhead
says: read 400 Gb/s as 400 GB/s
"""

ndr_ms = 2 * 7 / 8 * 8 * 2048 * 8192 * 2 / 400e9 * 1e3
ndr_overhead = 4 * ndr_ms / compute_ms  # noqa: F821 - the solution cell defines it
