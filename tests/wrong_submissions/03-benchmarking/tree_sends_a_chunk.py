"""Lets each round of the tree send n / p bytes, as a ring's step does, where it sends the whole array.

replaces: cost_models
fails: test_cost_models test_cost_models_more
says: send n / p per round, as a ring does
"""

import math


def tree_seconds(p: int, n: float, alpha: float, beta: float) -> float:
    return 2 * math.ceil(math.log2(p)) * (alpha + n / (p * beta))


def crossover_bytes(p: int, alpha: float, beta: float) -> float:
    # With both sending n / p per message, the tree is faster at every size when it takes fewer rounds.
    return 0.0
