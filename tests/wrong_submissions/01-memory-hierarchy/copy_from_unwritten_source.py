"""Copies from a fresh torch.empty that nothing wrote: it times reads of the kernel's zero page.

replaces: copy_bandwidth
fails: test_copy_bandwidth
says: from a tensor that nothing wrote
"""

import math
import time

import torch


def measure_copy_bandwidth(
    num_bytes: int, iterations: int = 1, repeats: int = 5, clock=time.perf_counter, device="cpu"
) -> float:
    on_gpu = torch.device(device).type == "cuda"
    src = torch.empty(num_bytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = math.inf
    for _ in range(repeats):
        if on_gpu:
            torch.cuda.synchronize()
        start = clock()
        for _ in range(iterations):
            dst.copy_(src)
        if on_gpu:
            torch.cuda.synchronize()
        best = min(best, clock() - start)
    return 2 * num_bytes * iterations / best
