"""Fills each stage with layers while it stays under the average cost a stage, leaving the rest to
the last: a greedy split that is not always the best one.

replaces: split
fails: test_split test_split_more
says: leave the last stage every layer they did not take
"""


def split_layers(costs, num_stages):
    n = len(costs)
    if n < num_stages:
        raise ValueError("fewer layers than stages")
    target = sum(costs) / num_stages
    stages, start = [], 0
    for s in range(num_stages - 1):
        end, total = start + 1, costs[start]
        # leave at least one layer for each stage still to come
        while end < n - (num_stages - 1 - s) and total + costs[end] <= target:
            total += costs[end]
            end += 1
        stages.append(range(start, end))
        start = end
    return stages + [range(start, n)]
