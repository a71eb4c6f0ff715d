"""Starts the ranks anew for every size: each launch connects them again.

replaces: sweep
fails: test_sweep test_sweep_more
says: Launch once and loop over the sizes inside the ranks
"""

import torch


def sweep(name: str, sizes: list[int], world_size: int, timer) -> list[tuple[float, float]]:
    results = []
    for size in sizes:

        def on_rank(rank: int, world_size: int, size: int = size) -> float:
            return timer(rank, world_size, name, size)

        t = launch(on_rank, world_size, check_collectives=False)[0]  # noqa: F821 - the setup cell imports it
        chunk = size // (4 * world_size)
        count = chunk if name in ("all_gather", "gather") else world_size * chunk
        results.append((t, bandwidths(name, count, torch.float32, t, world_size)[1]))  # noqa: F821
    return results
