"""Applies all_reduce's factor 2(n-1)/n to reduce_scatter, which does only half of an all_reduce.

replaces: bandwidths
fails: test_bandwidths_all
says: use all_reduce's factor 2(n-1)/n
"""

import torch


def bandwidths(
    name: str, count: int, dtype: torch.dtype, seconds: float, world_size: int
) -> tuple[float, float]:
    n = world_size
    whole = count * dtype.itemsize * (n if name in ("all_gather", "gather") else 1)
    algbw = whole / seconds / 1e9
    if name in ("all_reduce", "reduce_scatter"):
        factor = 2 * (n - 1) / n
    elif name in ("broadcast", "reduce"):
        factor = 1.0
    else:
        factor = (n - 1) / n
    return algbw, algbw * factor
