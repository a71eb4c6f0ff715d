"""Counts 16 bytes of optimizer state per parameter (20 in all).

replaces: worked
fails: test_worked_stages test_worked_gpus
says: count K = 16 bytes of optimizer state
"""

import math

largest_by_stage = [80e9 / 20, 80e9 / (4 + 16 / 8), 80e9 / (2 + 18 / 8), 80e9 / (20 / 8)]
zero3_seconds = 3 * 7 / 8 * 26e9 / 450e9
gpus_for_70b = math.ceil(20 * 70e9 / 80e9)
