"""Tries every way to cut the layers into stages and keeps one whose slowest stage is fastest.

replaces: split
fails: none
"""

import itertools


def split_layers(costs, num_stages):
    n = len(costs)
    if num_stages > n:
        raise ValueError(f"{n} layers for {num_stages} stages: a stage would be empty")
    prefix = [0, *itertools.accumulate(costs)]
    best_bounds, best = None, float("inf")
    for cuts in itertools.combinations(range(1, n), num_stages - 1):
        bounds = (0, *cuts, n)
        slowest = max(prefix[b] - prefix[a] for a, b in zip(bounds, bounds[1:], strict=False))
        if slowest < best:
            best_bounds, best = bounds, slowest
    return [range(a, b) for a, b in zip(best_bounds, best_bounds[1:], strict=False)]
