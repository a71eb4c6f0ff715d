"""Predicts from beta alone, as if the size were large enough for alpha not to matter.

replaces: alpha_beta
fails: test_alpha_beta test_alpha_beta_more
says: leave out alpha
"""

import torch


def predict_busbw(name: str, size_bytes: int, world_size: int, alpha: float, beta: float) -> float:
    each_input = size_bytes // 4 // (world_size if name in ("all_gather", "gather") else 1)
    return bandwidths(name, each_input, torch.float32, size_bytes / beta, world_size)[1]  # noqa: F821
