"""Counts all 80 of the model's layers in one stage's forward, where a stage holds 10; the rest
right.

replaces: worked
fails: test_worked_forward
says: count all 80 layers, not the stage's 10
"""

import itertools

stage_parameters = 12 * 8192**2 * 10
bubble_8_32 = (8 - 1) / (32 + 8 - 1)
smallest_m = next(m for m in itertools.count(1) if (8 - 1) / (m + 8 - 1) <= 0.05)
send_ms = 4096 * 8192 * 2 / 50e9 * 1e3
stage_forward_ms = 2 * 12 * 8192**2 * 80 * 4096 / 8 / (0.5 * 989e12) * 1e3
state_gb = 16 * stage_parameters / 8 / 1e9
one_f_one_b_gb = min(8, 32) * 3
gpipe_gb = 32 * 3
