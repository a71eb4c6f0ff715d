"""Counts a gradient's size in bits, not bytes.

replaces: moving_bytes
fails: test_transfer
"""

import torch


def gradient_bytes(num_params: int, dtype: torch.dtype) -> int:
    bits = torch.finfo(dtype).bits if dtype.is_floating_point else torch.iinfo(dtype).bits
    return num_params * bits
