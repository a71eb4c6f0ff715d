"""Pairs chunk i with chunk i + world_size, so that rank 0 holds two early chunks.

replaces: zigzag
fails: test_zigzag test_zigzag_more
says: pair chunk i with chunk i + world_size
"""


def zigzag_layout(seq_len, world_size):
    n = 2 * world_size
    base, extra = divmod(seq_len, n)
    bounds, start = [], 0
    for c in range(n):
        stop = start + base + (1 if c < extra else 0)
        bounds.append((start, stop))
        start = stop
    return [[bounds[i], bounds[i + world_size]] for i in range(world_size)]
