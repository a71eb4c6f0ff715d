"""Gives each piece's start and offset as positions in the whole flat buffer.

replaces: flat
fails: test_flat test_flat_more
says: offsets in the whole flat buffer
"""


def shard_pieces(numels, world_size, rank):
    if not 0 <= rank < world_size:
        raise ValueError("no such rank")
    shard = -(-sum(numels) // world_size)
    low, high = rank * shard, (rank + 1) * shard
    pieces, start = [], 0
    for i, n in enumerate(numels):
        a, b = max(start, low), min(start + n, high)
        if a < b:
            pieces.append((i, a, a, b - a))
        start += n
    return shard, pieces
