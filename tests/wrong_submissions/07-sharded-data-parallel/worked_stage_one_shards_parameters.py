"""Shards the bf16 parameters already in stage 1, with the optimizer state.

replaces: worked
fails: test_worked_stages
says: too in stage 1
"""

largest_by_stage = [80e9 / 16, 80e9 / (2 + 14 / 8), 80e9 / (2 + 14 / 8), 80e9 / 2]
zero3_seconds = 3 * 7 / 8 * 26e9 / 450e9
gpus_for_70b = 14
