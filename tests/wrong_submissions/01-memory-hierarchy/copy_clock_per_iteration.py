"""Reads the clock around every copy and adds the readings up, instead of once per run.

replaces: copy_bandwidth
fails: test_copy_bandwidth
says: a run does all its iterations between those two readings
"""

import math
import time

import torch


def measure_copy_bandwidth(
    num_bytes: int, iterations: int = 1, repeats: int = 5, clock=time.perf_counter, device="cpu"
) -> float:
    on_gpu = torch.device(device).type == "cuda"
    src = torch.full((num_bytes,), 7, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = math.inf
    for _ in range(repeats):
        if on_gpu:
            torch.cuda.synchronize()
        elapsed = 0.0
        for _ in range(iterations):
            start = clock()
            dst.copy_(src)
            elapsed += clock() - start
        if on_gpu:
            torch.cuda.synchronize()
        best = min(best, elapsed)
    return 2 * num_bytes * iterations / best
