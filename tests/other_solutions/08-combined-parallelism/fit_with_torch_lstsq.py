"""Fits x = 1/e with torch's least squares, in float64.

replaces: fit
fails: none
"""

import torch


def fit_efficiency(runs):
    a = torch.tensor([[r["at_peak"]] for r in runs], dtype=torch.float64)
    b = torch.tensor([[r["seconds"] - r["rest"]] for r in runs], dtype=torch.float64)
    x = torch.linalg.lstsq(a, b).solution.item()
    return 1 / x
