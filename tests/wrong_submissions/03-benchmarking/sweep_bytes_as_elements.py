"""Passes bandwidths() the size in bytes where it takes a number of elements.

replaces: sweep
fails: test_sweep test_sweep_more
says: pass bandwidths() the size in bytes, not in elements
"""

import torch


def sweep(name: str, sizes: list[int], world_size: int, timer) -> list[tuple[float, float]]:
    def on_rank(rank: int, world_size: int) -> list[float]:
        return [timer(rank, world_size, name, size) for size in sizes]

    seconds = launch(on_rank, world_size, check_collectives=False)[0]  # noqa: F821 - the setup cell imports it
    return [
        (t, bandwidths(name, size, torch.float32, t, world_size)[1])  # noqa: F821
        for size, t in zip(sizes, seconds, strict=True)
    ]
