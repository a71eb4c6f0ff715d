"""Draws fresh random matrices inside each timed run, so the clock times torch.randn too.

replaces: matmul_flops
fails: test_matmul_flops
says: it also ran torch's randn
"""

import math
import time

import torch


def measure_matmul_flops(
    n: int, iterations: int = 1, repeats: int = 5, clock=time.perf_counter, dtype=torch.float32, device="cpu"
) -> float:
    on_gpu = torch.device(device).type == "cuda"
    a = torch.randn(n, n, dtype=dtype, device=device)
    b = torch.randn(n, n, dtype=dtype, device=device)
    a @ b
    best = math.inf
    for _ in range(repeats):
        if on_gpu:
            torch.cuda.synchronize()
        start = clock()
        a = torch.randn(n, n, dtype=dtype, device=device)
        for _ in range(iterations):
            a @ b
        if on_gpu:
            torch.cuda.synchronize()
        best = min(best, clock() - start)
    return 2 * n**3 * iterations / best
