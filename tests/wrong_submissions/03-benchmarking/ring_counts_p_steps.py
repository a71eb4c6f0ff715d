"""Counts p steps each way round the ring, where p - 1 bring every chunk to every rank.

replaces: cost_models
fails: test_cost_models test_cost_models_more
says: count p steps
"""


def ring_seconds(p: int, n: float, alpha: float, beta: float) -> float:
    return 2 * p * (alpha + n / (p * beta))
