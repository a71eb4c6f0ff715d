"""Counts one rank's input as the whole array for all_gather and gather.

replaces: bandwidths
fails: test_bandwidths test_bandwidths_all
says: count one rank's share of the array
"""

import torch


def bandwidths(
    name: str, count: int, dtype: torch.dtype, seconds: float, world_size: int
) -> tuple[float, float]:
    n = world_size
    algbw = count * dtype.itemsize / seconds / 1e9
    if name == "all_reduce":
        factor = 2 * (n - 1) / n
    elif name in ("broadcast", "reduce"):
        factor = 1.0
    else:
        factor = (n - 1) / n
    return algbw, algbw * factor
