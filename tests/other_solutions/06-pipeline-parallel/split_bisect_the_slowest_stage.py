"""Searches for the smallest cost of the slowest stage among the sums of consecutive layers, each
tried by filling stages greedily under it; the layers left over go one to a stage at the end.

replaces: split
fails: none
"""


def _stages_under(costs, cap):
    """How many stages a greedy fill under `cap` needs, and where they start."""
    starts, total = [0], 0.0
    for k, cost in enumerate(costs):
        if cost > cap:
            return None
        if total + cost > cap:
            starts.append(k)
            total = 0.0
        total += cost
    return starts


def split_layers(costs, num_stages):
    n = len(costs)
    if n < num_stages:
        raise ValueError(f"cannot give {num_stages} stages a layer each out of {n}")
    sums = sorted({sum(costs[a:b]) for a in range(n) for b in range(a + 1, n + 1)})
    low, high = 0, len(sums) - 1
    while low < high:
        middle = (low + high) // 2
        starts = _stages_under(costs, sums[middle])
        if starts is not None and len(starts) <= num_stages:
            high = middle
        else:
            low = middle + 1
    starts = _stages_under(costs, sums[low])
    # Too few stages: split off the last layers one by one; a stage only gets cheaper.
    cuts = set(starts)
    k = n - 1
    while len(cuts) < num_stages:
        if k not in cuts:
            cuts.add(k)
        k -= 1
    bounds = [*sorted(cuts), n]
    return [range(bounds[i], bounds[i + 1]) for i in range(num_stages)]
