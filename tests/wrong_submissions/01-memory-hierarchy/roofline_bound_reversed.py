"""Swaps the two sides of the ridge point.

replaces: roofline
fails: test_roofline
"""


def bound(intensity: float, peak_flops: float, bandwidth: float) -> str:
    return "memory" if intensity * bandwidth >= peak_flops else "compute"
