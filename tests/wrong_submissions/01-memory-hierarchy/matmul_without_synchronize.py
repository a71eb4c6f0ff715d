"""Never synchronises: on a GPU the clock times the launches, not the multiplies.

replaces: matmul_flops
fails: test_matmul_flops
says: with no torch.cuda.synchronize() in between
"""

import math
import time

import torch


def measure_matmul_flops(
    n: int, iterations: int = 1, repeats: int = 5, clock=time.perf_counter, dtype=torch.float32, device="cpu"
) -> float:
    a = torch.randn(n, n, dtype=dtype, device=device)
    b = torch.randn(n, n, dtype=dtype, device=device)
    a @ b
    best = math.inf
    for _ in range(repeats):
        start = clock()
        for _ in range(iterations):
            a @ b
        best = min(best, clock() - start)
    return 2 * n**3 * iterations / best
