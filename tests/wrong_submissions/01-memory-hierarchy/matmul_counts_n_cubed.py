"""Counts n³ FLOPs for an n x n matmul, forgetting that a multiply-add is two.

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
        start = clock()
        a @ b
        best = min(best, clock() - start)
    return n**3 / best
