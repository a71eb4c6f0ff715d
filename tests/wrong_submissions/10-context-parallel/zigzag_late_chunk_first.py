"""Lists each rank's late chunk before its early one.

replaces: zigzag
fails: test_zigzag test_zigzag_more
says: give rank i its late chunk first
"""


def zigzag_layout(seq_len, world_size):
    n = 2 * world_size
    base, extra = divmod(seq_len, n)
    bounds, start = [], 0
    for c in range(n):
        stop = start + base + (1 if c < extra else 0)
        bounds.append((start, stop))
        start = stop
    return [[bounds[n - 1 - i], bounds[i]] for i in range(world_size)]
