"""Keeps the compute time of 64 GPUs on 256.

replaces: worked
fails: test_worked_dp
says: keep the compute of 64 GPUs
"""

dp_share_256 = all_reduce / (6 * 70e9 * 512 * 4096 / (64 * 989e12) + all_reduce)  # noqa: F821
