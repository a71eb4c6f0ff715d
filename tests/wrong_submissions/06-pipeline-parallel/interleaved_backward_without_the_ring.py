"""Closes the ring in the forward pass but not in the backward: on the last GPU, every chunk's
backward waits only for its own forward, not for GPU 0's backward of the next chunk.

replaces: interleaved
fails: test_interleaved_simulate
says: when device 2 is free and (0, 'B', 3, 1) has finished
"""


def simulate_interleaved(orders, num_chunks, forward=1, backward=2):
    p = len(orders)
    times, done, free = {}, [0] * p, [0.0] * p
    while any(done[d] < len(orders[d]) for d in range(p)):
        placed = False
        for d in range(p):
            if done[d] == len(orders[d]):
                continue
            kind, i, c = orders[d][done[d]]
            if kind == "F":
                waits = [(d - 1, "F", i, c)] if d > 0 else ([(p - 1, "F", i, c - 1)] if c > 0 else [])
            else:
                waits = [(d + 1, "B", i, c)] if d < p - 1 else [(d, "F", i, c)]
            if all(w in times for w in waits):
                start = max([free[d]] + [times[w][1] for w in waits])
                free[d] = start + (forward if kind == "F" else backward)
                times[(d, kind, i, c)] = (start, free[d])
                done[d], placed = done[d] + 1, True
        if not placed:
            raise ValueError("deadlock")
    return times
