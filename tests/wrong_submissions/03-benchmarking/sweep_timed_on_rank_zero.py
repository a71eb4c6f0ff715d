"""Times the sizes on rank 0 alone, whose result is the one kept; the other ranks never join the timing.

replaces: sweep
fails: test_sweep test_sweep_more
says: every rank must call it, for every size
"""

import torch


def sweep(name: str, sizes: list[int], world_size: int, timer) -> list[tuple[float, float]]:
    def on_rank(rank: int, world_size: int) -> list[float] | None:
        if rank != 0:
            return None
        return [timer(rank, world_size, name, size) for size in sizes]

    seconds = launch(on_rank, world_size, check_collectives=False)[0]  # noqa: F821 - the setup cell imports it
    results = []
    for size, t in zip(sizes, seconds, strict=True):
        chunk = size // (4 * world_size)
        count = chunk if name in ("all_gather", "gather") else world_size * chunk
        results.append((t, bandwidths(name, count, torch.float32, t, world_size)[1]))  # noqa: F821
    return results
