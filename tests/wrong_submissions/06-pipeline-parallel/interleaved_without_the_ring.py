"""Lets a chunk wait only for the GPU before it in the same chunk: GPU 0's second chunk starts
before the last GPU has finished the first chunk, as if the GPUs were not a ring.

replaces: interleaved
fails: test_interleaved_simulate
says: when device 0 is free and (2, 'F', 3, 0) has finished
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
                waits = [(d - 1, "F", i, c)] if d > 0 else []
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
