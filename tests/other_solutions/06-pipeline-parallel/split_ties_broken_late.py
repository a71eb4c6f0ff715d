"""Binary search on the slowest stage's cost over the candidate sums, then cuts as late as the
bound allows: among splits as fast as the best, it picks another than the solution does.

replaces: split
fails: none
"""

import itertools


def split_layers(costs, num_stages):
    n = len(costs)
    if n < num_stages:
        raise ValueError(f"{n} layers cannot make {num_stages} non-empty stages")
    prefix = list(itertools.accumulate(costs, initial=0))

    def split_under(bound):
        # from the end: each stage takes layers while it stays under the bound, leaving one per
        # stage still to fill before it
        cuts, end = [n], n
        for stages_left in range(num_stages - 1, 0, -1):
            start = end - 1
            while start - 1 >= stages_left and prefix[end] - prefix[start - 1] <= bound:
                start -= 1
            if prefix[end] - prefix[start] > bound:
                return None
            cuts.append(start)
            end = start
        if prefix[end] > bound:
            return None
        return [0, *reversed(cuts)]

    candidates = sorted({prefix[b] - prefix[a] for a in range(n) for b in range(a + 1, n + 1)})
    low, high = 0, len(candidates) - 1
    while low < high:
        mid = (low + high) // 2
        if split_under(candidates[mid]) is None:
            low = mid + 1
        else:
            high = mid
    bounds = split_under(candidates[low])
    return [range(a, b) for a, b in itertools.pairwise(bounds)]
