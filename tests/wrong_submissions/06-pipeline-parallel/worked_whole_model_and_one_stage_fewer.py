"""Counts the whole model's layers for one stage's forward, and 1F1B's warm-up as p - 1.

replaces: worked
fails: test_worked_forward test_worked_memory
"""

bubble_8_32 = 7 / 39
smallest_m = 133
send_ms = 4096 * 8192 * 2 / 50e9 * 1e3
stage_forward_ms = 2 * 12 * 8192**2 * 80 * 4096 / 8 / (0.5 * 989e12) * 1e3
state_gb = 16 * 12 * 8192**2 * 10 / 8 / 1e9
one_f_one_b_gb = 7 * 3
gpipe_gb = 96
