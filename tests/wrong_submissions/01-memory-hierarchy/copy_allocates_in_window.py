"""Makes the destination inside the timed window, so each run also times an allocation.

replaces: copy_bandwidth
fails: test_copy_bandwidth
says: make the tensors before the clock starts
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
        start = clock()
        dst = torch.empty_like(src)
        for _ in range(iterations):
            dst.copy_(src)
        if on_gpu:
            torch.cuda.synchronize()
        best = min(best, clock() - start)
    return 2 * num_bytes * iterations / best
