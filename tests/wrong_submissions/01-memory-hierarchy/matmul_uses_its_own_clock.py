"""Reads time.perf_counter directly instead of the clock it was given.

replaces: matmul_flops
fails: test_matmul_flops
says: the clock it was given was never read
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
        start = time.perf_counter()
        for _ in range(iterations):
            a @ b
        if on_gpu:
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 * iterations / best
