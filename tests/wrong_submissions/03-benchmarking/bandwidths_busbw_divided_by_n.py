"""Divides busbw by the world size once more, as if each rank's link carried only its own share.

replaces: bandwidths
fails: test_bandwidths test_bandwidths_all
says: divide by the number of ranks once too often
"""

import torch


def bandwidths(
    name: str, count: int, dtype: torch.dtype, seconds: float, world_size: int
) -> tuple[float, float]:
    n = world_size
    whole = count * dtype.itemsize * (n if name in ("all_gather", "gather") else 1)
    algbw = whole / seconds / 1e9
    if name == "all_reduce":
        factor = 2 * (n - 1) / n
    elif name in ("broadcast", "reduce"):
        factor = 1.0
    else:
        factor = (n - 1) / n
    return algbw, algbw * factor / n
