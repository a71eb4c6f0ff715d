"""Divides ZeRO-3's traffic by NVLink's 900 GB/s, both directions added, instead of the 450 GB/s a
GPU sends at.

replaces: worked
fails: test_worked_comm
says: 900 GB/s of both directions
"""

largest_by_stage = [80e9 / 16, 80e9 / 5.5, 80e9 / 3.75, 80e9 / 2]
zero3_seconds = 3 * 7 / 8 * 26e9 / 900e9
gpus_for_70b = 14
