"""Fills a table of the best slowest stage for the last layers on the last stages, from the end of
the model, and reads the split from it front to back.

replaces: split
fails: none
"""


def split_layers(costs, num_stages):
    n = len(costs)
    if n < num_stages:
        raise ValueError("fewer layers than stages")
    suffix = [0.0] * (n + 1)
    for k in range(n - 1, -1, -1):
        suffix[k] = suffix[k + 1] + costs[k]
    inf = float("inf")
    # best[s][k]: the slowest of s stages holding layers k..n-1, at best; cut[s][k]: where the first ends
    best = [[inf] * (n + 1) for _ in range(num_stages + 1)]
    cut = [[0] * (n + 1) for _ in range(num_stages + 1)]
    for k in range(n):
        best[1][k] = suffix[k]
    for s in range(2, num_stages + 1):
        for k in range(n - s + 1):
            for end in range(k + 1, n - s + 2):
                slowest = max(suffix[k] - suffix[end], best[s - 1][end])
                if slowest < best[s][k]:
                    best[s][k], cut[s][k] = slowest, end
    stages, k = [], 0
    for s in range(num_stages, 1, -1):
        stages.append(range(k, cut[s][k]))
        k = cut[s][k]
    return [*stages, range(k, n)]
