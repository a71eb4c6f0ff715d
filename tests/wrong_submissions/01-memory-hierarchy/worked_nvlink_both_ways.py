"""Uses NVLink's 900 GB/s, both directions added, for one-way transfers.

replaces: worked
fails: test_worked_links test_worked_ring
says: use 900 GB/s (both directions added)
"""

nvlink_seconds = 14e9 / 900e9
ring_seconds = 2 * 7 * (14e9 / 8) / 900e9
