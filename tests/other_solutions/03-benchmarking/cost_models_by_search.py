"""Rounds counted with bit_length, and the crossover found by bisection on the two models; 0 as an int.

replaces: cost_models
fails: none
"""


def ring_seconds(p, n, alpha, beta):
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * n / beta


def tree_seconds(p, n, alpha, beta):
    rounds = (p - 1).bit_length()  # ceil(log2 p) for p >= 1
    return 2 * rounds * alpha + 2 * rounds * n / beta


def crossover_bytes(p, alpha, beta):
    def tree_ahead(n):
        return tree_seconds(p, n, alpha, beta) < ring_seconds(p, n, alpha, beta)

    if not tree_ahead(0.0):
        return 0
    low, high = 0.0, 1.0
    while tree_ahead(high):
        high *= 2
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if tree_ahead(middle) else (low, middle)
    return (low + high) / 2
