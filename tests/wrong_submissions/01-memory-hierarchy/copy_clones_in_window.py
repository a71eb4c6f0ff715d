"""Copies with clone inside the timed runs: every copy also allocates a new tensor.

replaces: copy_bandwidth
fails: test_copy_bandwidth
says: clone makes a new tensor every time
"""

import math
import time

import torch


def measure_copy_bandwidth(
    num_bytes: int, iterations: int = 1, repeats: int = 5, clock=time.perf_counter, device="cpu"
) -> float:
    on_gpu = torch.device(device).type == "cuda"
    src = torch.randint(0, 256, (num_bytes,), dtype=torch.uint8, device=device)
    dst = src.clone()
    best = math.inf
    for _ in range(repeats):
        if on_gpu:
            torch.cuda.synchronize()
        start = clock()
        for _ in range(iterations):
            dst = src.clone()
        if on_gpu:
            torch.cuda.synchronize()
        best = min(best, clock() - start)
    del dst
    return 2 * num_bytes * iterations / best
