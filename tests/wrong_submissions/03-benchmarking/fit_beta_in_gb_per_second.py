"""Returns beta in GB/s where the statement asks for bytes per second.

replaces: alpha_beta
fails: test_alpha_beta test_alpha_beta_more
says: give beta in GB/s, not bytes per second
"""

_right_fit = fit_alpha_beta  # noqa: F821 - the solution cell defines it


def fit_alpha_beta(sizes: list[float], seconds: list[float]) -> tuple[float, float]:
    alpha, beta = _right_fit(sizes, seconds)
    return alpha, beta / 1e9
