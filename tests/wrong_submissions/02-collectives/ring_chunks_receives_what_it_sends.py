"""Off-by-one: each rank receives the chunk with the number it sends, not its left neighbour's.

replaces: ring_chunks
fails: test_ring_chunks
says: both ends must agree on which
"""


def ring_chunks(rank: int, step: int, world_size: int) -> tuple[int, int]:
    p = world_size
    if step < p - 1:
        return (rank - step) % p, (rank - step) % p
    step -= p - 1
    return (rank + 1 - step) % p, (rank + 1 - step) % p
