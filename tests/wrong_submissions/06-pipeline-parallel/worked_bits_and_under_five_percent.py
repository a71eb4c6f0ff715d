"""Reads NDR's 50 GB/s as gigabits, and asks for a bubble under 5% where the question says 5% or
less.

replaces: worked
fails: test_worked_send test_worked_smallest
"""

bubble_8_32 = 7 / 39
smallest_m = next(m for m in range(1, 1000) if 7 / (m + 7) < 0.05)
send_ms = 4096 * 8192 * 2 * 8 / 50e9 * 1e3
stage_forward_ms = 2 * 12 * 8192**2 * 10 * 4096 / 8 / (0.5 * 989e12) * 1e3
state_gb = 16 * 12 * 8192**2 * 10 / 8 / 1e9
one_f_one_b_gb = 24
gpipe_gb = 96
