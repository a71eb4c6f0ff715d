"""Uses NVLink's 900 GB/s, both directions added.

replaces: worked
fails: test_worked_nvlink
says: use 900 GB/s, NVLink's two directions together
"""

nvlink_ms = 2 * 7 / 8 * 8 * 2048 * 8192 * 2 / 900e9 * 1e3
