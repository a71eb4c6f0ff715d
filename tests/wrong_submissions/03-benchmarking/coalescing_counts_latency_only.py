"""Counts only the latencies saved: k calls become one, so k times faster, whatever the sizes.

replaces: coalescing
fails: test_coalescing
"""


def coalescing_speedup(k: int, n: float, alpha: float, beta: float) -> float:
    return float(k)
