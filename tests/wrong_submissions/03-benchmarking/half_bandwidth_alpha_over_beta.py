"""Takes n_1/2 as alpha / beta, which is not even a number of bytes.

replaces: alpha_beta
fails: test_alpha_beta test_alpha_beta_more
"""


def half_bandwidth_size(alpha: float, beta: float) -> float:
    return alpha / beta
