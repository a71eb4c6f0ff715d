"""Reads time.perf_counter directly instead of the clock it was given.

replaces: matmul_flops
fails: test_matmul_flops
"""

import math
import time

import torch


def measure_matmul_flops(
    n: int, repeats: int = 5, clock=time.perf_counter, dtype=torch.float32, device="cpu"
) -> float:
    a = torch.randn(n, n, dtype=dtype, device=device)
    b = torch.randn(n, n, dtype=dtype, device=device)
    a @ b
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best
