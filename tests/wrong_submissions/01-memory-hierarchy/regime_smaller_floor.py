"""Compares the time with the smaller floor, so a compute-bound multiply looks overhead-bound.

replaces: roofline
fails: test_regime
says: compare the time with the smaller floor
"""


def regime(flops: float, num_bytes: float, seconds: float, peak_flops: float, bandwidth: float) -> str:
    compute_seconds, memory_seconds = flops / peak_flops, num_bytes / bandwidth
    if min(compute_seconds, memory_seconds) < seconds / 2:
        return "overhead"
    return "compute" if compute_seconds >= memory_seconds else "memory"
