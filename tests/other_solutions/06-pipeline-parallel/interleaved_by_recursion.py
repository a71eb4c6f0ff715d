"""Each step's end found by recursion over what it waits for: its device's previous step and its
neighbour in the ring of virtual stages, remembered once computed.

replaces: interleaved
fails: none
"""

import functools


def simulate_interleaved(orders, num_chunks, forward=1, backward=2):
    p = len(orders)
    position = {(d, *step): k for d, order in enumerate(orders) for k, step in enumerate(order)}

    def neighbour(d, kind, i, c):
        stage = c * p + d
        if kind == "F":
            return None if stage == 0 else ((stage - 1) % p, "F", i, (stage - 1) // p)
        if stage == p * num_chunks - 1:
            return (d, "F", i, c)
        return ((stage + 1) % p, "B", i, (stage + 1) // p)

    @functools.cache
    def start(key):
        d = key[0]
        k = position[key]
        begin = end((d, *orders[d][k - 1])) if k else 0
        other = neighbour(*key)
        return max(begin, end(other)) if other else begin

    @functools.cache
    def end(key):
        return start(key) + (forward if key[1] == "F" else backward)

    return {key: (start(key), end(key)) for key in position}
