"""Counts the inputs read but not the output written, for both kinds of operation.

replaces: intensity
fails: test_matmul_intensity test_elementwise_intensity
says: forget to count writing the output
"""

import torch


def matmul_intensity(m: int, k: int, n: int, dtype: torch.dtype) -> float:
    return 2 * m * k * n / ((m * k + k * n) * dtype.itemsize)


def elementwise_intensity(
    flops_per_element: float, num_inputs: int, num_outputs: int, dtype: torch.dtype
) -> float:
    return flops_per_element / (num_inputs * dtype.itemsize)
