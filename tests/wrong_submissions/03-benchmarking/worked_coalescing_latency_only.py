"""Counts only the latencies that one call saves: 64 times faster, whatever the bytes.

replaces: worked
fails: test_worked_coalescing
says: count only the latencies saved
"""

coalesced_speedup = 64
