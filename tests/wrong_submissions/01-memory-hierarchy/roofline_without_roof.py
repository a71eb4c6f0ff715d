"""Forgets the roof: attainable FLOP/s grows with intensity for ever.

replaces: roofline
fails: test_attainable
says: forget the roof
"""


def attainable_flops(intensity: float, peak_flops: float, bandwidth: float) -> float:
    return intensity * bandwidth
