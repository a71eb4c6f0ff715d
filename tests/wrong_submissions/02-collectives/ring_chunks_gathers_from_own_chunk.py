"""Off-by-one in the all-gather: it starts from chunk `rank`, which is not the one completed.

replaces: ring_chunks
fails: test_ring_chunks
says: a rank passes on only chunks that are complete
"""


def ring_chunks(rank: int, step: int, world_size: int) -> tuple[int, int]:
    p = world_size
    if step < p - 1:
        return (rank - step) % p, (rank - step - 1) % p
    step -= p - 1
    return (rank - step) % p, (rank - step - 1) % p
