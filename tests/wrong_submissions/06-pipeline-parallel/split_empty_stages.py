"""Balances the costs, but with fewer layers than stages returns stages with no layers instead of
saying that the pipeline cannot be built.

replaces: split
fails: test_split test_split_more
says: with fewer layers than stages, raise a ValueError
"""

import itertools


def split_layers(costs, num_stages):
    n = len(costs)
    if n < num_stages:
        return [range(min(s, n), min(s + 1, n)) for s in range(num_stages)]
    best = None
    for cuts in itertools.combinations(range(1, n), num_stages - 1):
        bounds = [0, *cuts, n]
        slowest = max(sum(costs[a:b]) for a, b in itertools.pairwise(bounds))
        if best is None or slowest < best[0]:
            best = (slowest, bounds)
    return [range(a, b) for a, b in itertools.pairwise(best[1])]
