"""Solves for the crossover with a ring that sends all n bytes each step, not n / p.

replaces: cost_models
fails: test_cost_models test_cost_models_more
says: let the ring send all n bytes each step
"""

import math


def crossover_bytes(p: int, alpha: float, beta: float) -> float:
    rounds = math.ceil(math.log2(p))
    if p - 1 <= rounds:
        return 0.0
    return (p - 1 - rounds) * alpha * beta / (rounds - (p - 1))
