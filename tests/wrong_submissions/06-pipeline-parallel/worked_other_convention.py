"""Measures the bubble against the work, (p - 1) / m, in both bubble answers.

replaces: worked
fails: test_worked_bubble test_worked_smallest
says: the other convention
"""

bubble_8_32 = 7 / 32
smallest_m = 140
send_ms = 4096 * 8192 * 2 / 50e9 * 1e3
stage_forward_ms = 2 * 12 * 8192**2 * 10 * 4096 / 8 / (0.5 * 989e12) * 1e3
state_gb = 16 * 12 * 8192**2 * 10 / 8 / 1e9
one_f_one_b_gb = 24
gpipe_gb = 96
