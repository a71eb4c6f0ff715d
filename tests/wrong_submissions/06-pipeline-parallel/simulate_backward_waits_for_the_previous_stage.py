"""Makes a backward wait for the previous stage's backward, as a forward waits for the previous
stage's forward: gradients flow the other way.

replaces: bubble
fails: test_simulate
says: when stage 0 is free and (1, 'B', 0) has finished
"""


def simulate(orders, forward=1, backward=2):
    num_stages, times = len(orders), {}
    done, free = [0] * num_stages, [0.0] * num_stages
    while any(done[s] < len(orders[s]) for s in range(num_stages)):
        placed = False
        for s in range(num_stages):
            if done[s] == len(orders[s]):
                continue
            kind, i = orders[s][done[s]]
            needs = [(s - 1, kind, i)] if s > 0 else []
            if kind == "B":
                needs.append((s, "F", i))
            if all(need in times for need in needs):
                start = max([free[s]] + [times[need][1] for need in needs])
                times[(s, kind, i)] = (start, start + (forward if kind == "F" else backward))
                free[s], done[s], placed = times[(s, kind, i)][1], done[s] + 1, True
        if not placed:
            raise ValueError("stuck")
    return times
