"""Counts ZeRO-3's bytes as one all_reduce's.

replaces: worked
fails: test_worked_bytes
says: count ZeRO-3 like data parallelism
"""

fsdp_over_pp_bytes = (8 * 2 * 7 / 8 * 2 * 70e9 / 8) / (64 * 2 * 4096 * 8192 * 2 / 8)
