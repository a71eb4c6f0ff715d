"""Makes its matrices on the CPU whatever the device.

replaces: matmul_flops
fails: test_matmul_flops
says: make the tensors on the device the function is given
"""

import math
import time

import torch


def measure_matmul_flops(
    n: int, iterations: int = 1, repeats: int = 5, clock=time.perf_counter, dtype=torch.float32, device="cpu"
) -> float:
    on_gpu = torch.device(device).type == "cuda"
    a = torch.randn(n, n, dtype=dtype)
    b = torch.randn(n, n, dtype=dtype)
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
