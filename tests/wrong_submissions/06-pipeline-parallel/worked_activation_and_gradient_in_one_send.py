"""Counts a micro-batch's activation and its gradient in one send, though the gradient comes back in
a send of its own; the rest right.

replaces: worked
fails: test_worked_send
says: send twice the activation's bytes
"""

bubble_8_32 = 7 / 39
smallest_m = 133
send_ms = 2 * 4096 * 8192 * 2 / 50e9 * 1e3
stage_forward_ms = 2 * 12 * 8192**2 * 10 * 4096 / (0.5 * 989e12) / 8 * 1e3
state_gb = 16 * 12 * 8192**2 * 10 / 8 / 1e9
one_f_one_b_gb = 24
gpipe_gb = 96
