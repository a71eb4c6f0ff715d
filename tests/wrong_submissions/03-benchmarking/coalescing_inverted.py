"""Divides the other way round: the one large call's time over the k small ones'.

replaces: coalescing
fails: test_coalescing
"""


def coalescing_speedup(k: int, n: float, alpha: float, beta: float) -> float:
    return (alpha + k * n / beta) / (k * (alpha + n / beta))
