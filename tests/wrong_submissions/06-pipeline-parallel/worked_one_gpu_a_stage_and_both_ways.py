"""Gives each stage to one GPU, as if the node had no tensor parallelism, and counts the
activation and its gradient in one send.

replaces: worked
fails: test_worked_send test_worked_forward test_worked_state
"""

bubble_8_32 = 7 / 39
smallest_m = 133
send_ms = 2 * 4096 * 8192 * 2 / 50e9 * 1e3
stage_forward_ms = 2 * 12 * 8192**2 * 10 * 4096 / (0.5 * 989e12) * 1e3
state_gb = 16 * 12 * 8192**2 * 10 / 1e9
one_f_one_b_gb = 24
gpipe_gb = 96
