"""Averages the timed runs instead of keeping the fastest.

replaces: copy_bandwidth
fails: test_copy_bandwidth
says: average the runs instead of keeping the fastest
"""

import time

import torch


def measure_copy_bandwidth(
    num_bytes: int, iterations: int = 1, repeats: int = 5, clock=time.perf_counter, device="cpu"
) -> float:
    on_gpu = torch.device(device).type == "cuda"
    src = torch.full((num_bytes,), 7, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    total = 0.0
    for _ in range(repeats):
        if on_gpu:
            torch.cuda.synchronize()
        start = clock()
        for _ in range(iterations):
            dst.copy_(src)
        if on_gpu:
            torch.cuda.synchronize()
        total += clock() - start
    return 2 * num_bytes * iterations / (total / repeats)
