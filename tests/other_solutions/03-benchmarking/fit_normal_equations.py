"""The normal equations solved with Python's own floats (float64), as a list.

replaces: alpha_beta
fails: none
"""


def fit_alpha_beta(sizes, seconds):
    k = len(sizes)
    sum_n, sum_t = sum(sizes), sum(seconds)
    sum_nn = sum(n * n for n in sizes)
    sum_nt = sum(n * t for n, t in zip(sizes, seconds, strict=True))
    slope = (k * sum_nt - sum_n * sum_t) / (k * sum_nn - sum_n**2)
    return [(sum_t - slope * sum_n) / k, 1 / slope]


def predict_busbw(name, size_bytes, world_size, alpha, beta):
    algbw, busbw = bandwidths(name, 1, torch.uint8, 1.0, world_size)  # noqa: F821 - the factor alone
    ratio = busbw / algbw
    return ratio * size_bytes / (alpha + size_bytes / beta) / 1e9
