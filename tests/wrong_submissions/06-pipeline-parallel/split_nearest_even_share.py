"""Cuts where the running total of the costs comes nearest each even share of the whole (k/p of it
for the k-th cut): balanced when the costs are, but not the best split on costs no one chose.

replaces: split
fails: test_split_more
says: another split's slowest stage costs
"""

import itertools


def split_layers(costs, num_stages):
    n = len(costs)
    if n < num_stages:
        raise ValueError("fewer layers than stages")
    prefix = list(itertools.accumulate(costs, initial=0))
    cuts = [0]
    for k in range(1, num_stages):
        share = prefix[-1] * k / num_stages
        # the boundary nearest the share, leaving a layer for every stage on either side
        low, high = cuts[-1] + 1, n - (num_stages - k)
        cuts.append(min(range(low, high + 1), key=lambda b: abs(prefix[b] - share)))
    cuts.append(n)
    return [range(a, b) for a, b in itertools.pairwise(cuts)]
