"""Always multiplies float32 matrices, whatever dtype it is asked for.

replaces: matmul_flops
fails: test_matmul_flops
says: it should be of 65536 torch.bfloat16 elements
"""

import math
import time

import torch


def measure_matmul_flops(
    n: int, iterations: int = 1, repeats: int = 5, clock=time.perf_counter, dtype=torch.float32, device="cpu"
) -> float:
    on_gpu = torch.device(device).type == "cuda"
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    a @ b
    best = math.inf
    for _ in range(repeats):
        if on_gpu:
            torch.cuda.synchronize()
        start = clock()
        for _ in range(iterations):
            a @ b
        if on_gpu:
            torch.cuda.synchronize()
        best = min(best, clock() - start)
    return 2 * n**3 * iterations / best
