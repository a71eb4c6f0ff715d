"""Adds the compute and memory floors before comparing with the time, as if they could not overlap.

replaces: roofline
fails: test_regime
says: add the two floors
"""


def regime(flops: float, num_bytes: float, seconds: float, peak_flops: float, bandwidth: float) -> str:
    compute_seconds, memory_seconds = flops / peak_flops, num_bytes / bandwidth
    if compute_seconds + memory_seconds < seconds / 2:
        return "overhead"
    return "compute" if compute_seconds >= memory_seconds else "memory"
