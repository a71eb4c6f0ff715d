"""Cuts chunks of the rounded-up length, so that the last chunks come out short (or empty).

replaces: zigzag
fails: test_zigzag_more
says: cut chunks of the rounded-up length
"""


def zigzag_layout(seq_len, world_size):
    n = 2 * world_size
    size = -(-seq_len // n)
    bounds = [(min(c * size, seq_len), min((c + 1) * size, seq_len)) for c in range(n)]
    return [[bounds[i], bounds[n - 1 - i]] for i in range(world_size)]
