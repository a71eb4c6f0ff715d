"""Keeps 1F1B's micro-batches for the interleaved schedule: as if interleaving cost no memory.

replaces: worked
fails: test_worked_interleaved
says: hold what 1F1B holds, without interleaving
"""

interleaved_gb = 8 * 3
