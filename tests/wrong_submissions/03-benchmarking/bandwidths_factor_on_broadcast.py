"""Gives broadcast and reduce the factor (n-1)/n: a pipelined chain keeps every link busy with all of it.

replaces: bandwidths
fails: test_bandwidths_all
says: use the factor (n-1)/n
"""

import torch


def bandwidths(
    name: str, count: int, dtype: torch.dtype, seconds: float, world_size: int
) -> tuple[float, float]:
    n = world_size
    whole = count * dtype.itemsize * (n if name in ("all_gather", "gather") else 1)
    algbw = whole / seconds / 1e9
    factor = 2 * (n - 1) / n if name == "all_reduce" else (n - 1) / n
    return algbw, algbw * factor
