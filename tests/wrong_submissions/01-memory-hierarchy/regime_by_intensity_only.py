"""Decides from the intensity alone, as if the time taken did not matter: never says overhead.

replaces: roofline
fails: test_regime
says: decide from the intensity alone
"""


def regime(flops: float, num_bytes: float, seconds: float, peak_flops: float, bandwidth: float) -> str:
    return "compute" if flops / num_bytes >= peak_flops / bandwidth else "memory"
