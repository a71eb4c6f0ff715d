"""Counts log2(p) rounds without rounding up: a tree on 5 ranks still needs 3 rounds, not 2.32.

replaces: cost_models
fails: test_cost_models_more
says: use log2(p) without rounding up
"""

import math


def tree_seconds(p: int, n: float, alpha: float, beta: float) -> float:
    return 2 * math.log2(p) * (alpha + n / beta)


def crossover_bytes(p: int, alpha: float, beta: float) -> float:
    rounds = math.log2(p)
    if p - 1 <= rounds:
        return 0.0
    return (p - 1 - rounds) * alpha * beta / (rounds - (p - 1) / p)
