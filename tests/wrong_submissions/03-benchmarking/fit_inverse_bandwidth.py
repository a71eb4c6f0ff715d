"""Fits the bandwidth rather than the time: 1 / bandwidth = alpha / n + 1 / beta, a line in 1 / n.

replaces: alpha_beta
fails: test_alpha_beta_more
says: fit 1/bandwidth against 1/n
"""

import torch


def fit_alpha_beta(sizes: list[float], seconds: list[float]) -> tuple[float, float]:
    n = torch.tensor(sizes, dtype=torch.float64)
    inverse_bandwidth = torch.tensor(seconds, dtype=torch.float64) / n
    design = torch.stack([1 / n, torch.ones_like(n)], dim=1)
    alpha, inverse_beta = torch.linalg.lstsq(design, inverse_bandwidth[:, None]).solution[:, 0].tolist()
    return float(alpha), float(1 / inverse_beta)
