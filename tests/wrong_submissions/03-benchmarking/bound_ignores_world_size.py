"""Allows one rounding in all, where each of the p - 1 additions of each order may round.

replaces: sum_bound
fails: test_sum_bound test_sum_bound_more
"""

import torch


def sum_error_bound(abs_sum: torch.Tensor, world_size: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.finfo(dtype).eps / 2 * abs_sum
