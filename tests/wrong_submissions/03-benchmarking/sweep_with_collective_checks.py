"""Launches the ranks with the launcher's collective checks on, which time an extra exchange per call.

replaces: sweep
fails: test_sweep test_sweep_more
says: launched the ranks with the launcher's collective checks on
"""

import torch


def sweep(name: str, sizes: list[int], world_size: int, timer) -> list[tuple[float, float]]:
    def on_rank(rank: int, world_size: int) -> list[float]:
        return [timer(rank, world_size, name, size) for size in sizes]

    seconds = launch(on_rank, world_size)[0]  # noqa: F821 - the setup cell imports it
    results = []
    for size, t in zip(sizes, seconds, strict=True):
        chunk = size // (4 * world_size)
        count = chunk if name in ("all_gather", "gather") else world_size * chunk
        results.append((t, bandwidths(name, count, torch.float32, t, world_size)[1]))  # noqa: F821
    return results
