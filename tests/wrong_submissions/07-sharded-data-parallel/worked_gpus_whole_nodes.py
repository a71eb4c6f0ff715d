"""Rounds the GPUs a 70B model needs up to whole nodes of eight.

replaces: worked
fails: test_worked_gpus
says: round up to whole nodes
"""

largest_by_stage = [80e9 / 16, 80e9 / 5.5, 80e9 / 3.75, 80e9 / 2]
zero3_seconds = 3 * 7 / 8 * 26e9 / 450e9
gpus_for_70b = 16
