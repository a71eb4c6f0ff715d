"""Multiplies with torch.einsum, whose permutes and reshapes are views, not extra work.

replaces: matmul_flops
fails: none
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
    torch.einsum("ij,jk->ik", a, b)
    best = math.inf
    for _ in range(repeats):
        if on_gpu:
            torch.cuda.synchronize()
        start = clock()
        for _ in range(iterations):
            torch.einsum("ij,jk->ik", a, b)
        if on_gpu:
            torch.cuda.synchronize()
        best = min(best, clock() - start)
    return 2 * n**3 * iterations / best
