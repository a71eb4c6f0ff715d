"""Times the warm-up copy along with the others.

replaces: copy_bandwidth
fails: test_copy_bandwidth
"""

import math
import time

import torch


def measure_copy_bandwidth(num_bytes: int, repeats: int = 5, clock=time.perf_counter, device="cpu") -> float:
    src = torch.empty(num_bytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    best = math.inf
    for _ in range(repeats + 1):
        start = clock()
        dst.copy_(src)
        best = min(best, clock() - start)
    return 2 * num_bytes / best
