"""Asks for a bubble under 5%, where the question says 5% or less: one micro-batch too many; the
rest right.

replaces: worked
fails: test_worked_smallest
says: ask for less than 5%, where the question says 5% or less
"""

import itertools

stage_parameters = 12 * 8192**2 * 10
bubble_8_32 = (8 - 1) / (32 + 8 - 1)
smallest_m = next(m for m in itertools.count(1) if (8 - 1) / (m + 8 - 1) < 0.05)
send_ms = 4096 * 8192 * 2 / 50e9 * 1e3
stage_forward_ms = 2 * stage_parameters * 4096 / 8 / (0.5 * 989e12) * 1e3
state_gb = 16 * stage_parameters / 8 / 1e9
one_f_one_b_gb = min(8, 32) * 3
gpipe_gb = 32 * 3
