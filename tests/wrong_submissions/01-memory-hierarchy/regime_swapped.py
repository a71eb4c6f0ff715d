"""Calls the larger floor's opposite: compute-bound operations come out memory-bound and back.

replaces: roofline
fails: test_regime
says: compare the two floors the wrong way round
"""


def regime(flops: float, num_bytes: float, seconds: float, peak_flops: float, bandwidth: float) -> str:
    compute_seconds, memory_seconds = flops / peak_flops, num_bytes / bandwidth
    if max(compute_seconds, memory_seconds) < seconds / 2:
        return "overhead"
    return "memory" if compute_seconds >= memory_seconds else "compute"
