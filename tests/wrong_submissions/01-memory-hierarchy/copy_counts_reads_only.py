"""Counts the bytes read but not the bytes written: half of STREAM's figure.

replaces: copy_bandwidth
fails: test_copy_bandwidth
"""

import math
import time

import torch


def measure_copy_bandwidth(num_bytes: int, repeats: int = 5, clock=time.perf_counter, device="cpu") -> float:
    src = torch.empty(num_bytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = math.inf
    for _ in range(repeats):
        start = clock()
        dst.copy_(src)
        best = min(best, clock() - start)
    return num_bytes / best
