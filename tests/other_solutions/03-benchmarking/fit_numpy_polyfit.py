"""NumPy's polyfit for the line, NumPy floats back; the busbw factor applied directly.

replaces: alpha_beta
fails: none
"""

import numpy as np


def fit_alpha_beta(sizes, seconds):
    slope, intercept = np.polyfit(
        np.asarray(sizes, dtype=np.float64), np.asarray(seconds, dtype=np.float64), 1
    )
    return intercept, 1 / slope


def predict_busbw(name, size_bytes, world_size, alpha, beta):
    n = world_size
    factor = {"all_reduce": 2 * (n - 1) / n, "broadcast": 1, "reduce": 1}.get(name, (n - 1) / n)
    return size_bytes / (alpha + size_bytes / beta) / 1e9 * factor
