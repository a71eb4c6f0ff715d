"""Counts FSDP's gathers and reduce_scatter once a step, though it reduces every micro-batch.

replaces: worked
fails: test_worked_bytes
says: ZeRO-3 counted once a step
"""

fsdp_over_pp_bytes = (3 * 7 / 8 * 2 * 70e9 / 8) / (64 * 2 * 4096 * 8192 * 2 / 8)
