"""Counts the tokens of one sequence (2048), not of the micro-batch of 8 sequences.

replaces: worked
fails: test_worked_nvlink test_worked_ndr test_worked_compute
says: compute for one sequence of 2048 tokens
"""

activation_bytes = 2048 * 8192 * 2
per_gpu = 2 * (8 - 1) / 8 * activation_bytes
nvlink_ms = per_gpu / 450e9 * 1e3
ndr_ms = per_gpu / (400e9 / 8) * 1e3
compute_ms = 6 * 12 * 8192**2 * 2048 / 8 / (0.5 * 989e12) * 1e3
ndr_overhead = 4 * ndr_ms / compute_ms
