"""Counts every rank's input as part of the array: all but all_gather's and gather's algbw n times too large.

replaces: bandwidths
fails: test_bandwidths test_bandwidths_all
says: count every rank's copy of the array, n times the whole
"""

import torch


def bandwidths(
    name: str, count: int, dtype: torch.dtype, seconds: float, world_size: int
) -> tuple[float, float]:
    n = world_size
    algbw = count * dtype.itemsize * n / seconds / 1e9
    if name == "all_reduce":
        factor = 2 * (n - 1) / n
    elif name in ("broadcast", "reduce"):
        factor = 1.0
    else:
        factor = (n - 1) / n
    return algbw, algbw * factor
