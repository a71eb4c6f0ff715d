"""Gives every collective a busbw of 0 at one rank, where the course's convention keeps each factor.

replaces: bandwidths
fails: test_bandwidths_all
says: treat one rank apart, with a busbw of 0
"""

import torch


def bandwidths(
    name: str, count: int, dtype: torch.dtype, seconds: float, world_size: int
) -> tuple[float, float]:
    n = world_size
    whole = count * dtype.itemsize * (n if name in ("all_gather", "gather") else 1)
    algbw = whole / seconds / 1e9
    if n == 1:
        return algbw, 0
    if name == "all_reduce":
        factor = 2 * (n - 1) / n
    elif name in ("broadcast", "reduce"):
        factor = 1.0
    else:
        factor = (n - 1) / n
    return algbw, algbw * factor
