"""Counts 2mkn bytes moved for a matmul, as if every FLOP read an element.

replaces: intensity
fails: test_matmul_intensity
says: count 2mkn elements moved
"""

import torch


def matmul_intensity(m: int, k: int, n: int, dtype: torch.dtype) -> float:
    return 2 * m * k * n / (2 * m * k * n * dtype.itemsize)
