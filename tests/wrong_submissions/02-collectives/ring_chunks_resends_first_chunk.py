"""Each rank sends the same chunk at every step of the reduce-scatter instead of passing on the
one that arrived, so a rank's data is added into a chunk twice.

replaces: ring_chunks
fails: test_ring_chunks
says: data added twice
"""


def ring_chunks(rank: int, step: int, world_size: int) -> tuple[int, int]:
    p = world_size
    if step < p - 1:
        return rank, (rank - 1) % p
    step -= p - 1
    return (rank + 1 - step) % p, (rank - step) % p
