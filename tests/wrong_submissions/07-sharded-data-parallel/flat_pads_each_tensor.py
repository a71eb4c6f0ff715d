"""Pads and splits each tensor on its own, instead of the one flat buffer.

replaces: flat
fails: test_flat test_flat_more
says: pad each parameter on its own
"""


def shard_pieces(numels, world_size, rank):
    if not 0 <= rank < world_size:
        raise ValueError("no such rank")
    pieces, offset = [], 0
    for i, n in enumerate(numels):
        size = -(-n // world_size)
        a, b = rank * size, min((rank + 1) * size, n)
        if a < b:
            pieces.append((i, a, offset, b - a))
        offset += size
    return offset, pieces
