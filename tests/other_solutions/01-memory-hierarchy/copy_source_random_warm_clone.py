"""Fills the source in place with random bytes, warms up with a clone, and keeps every run's time.

replaces: copy_bandwidth
fails: none
"""

import time

import torch


def measure_copy_bandwidth(
    num_bytes: int, iterations: int = 1, repeats: int = 5, clock=time.perf_counter, device="cpu"
) -> float:
    gpu = str(device).startswith("cuda")
    src = torch.empty(num_bytes, dtype=torch.uint8, device=device)
    src.random_()  # written, so its pages are real memory
    dst = src.clone()  # the warm-up: a first copy, into the tensor the timed runs reuse
    seconds = []
    for _ in range(repeats):
        if gpu:
            torch.cuda.synchronize()
        begin = clock()
        for _ in range(iterations):
            dst.copy_(src)
        if gpu:
            torch.cuda.synchronize()
        seconds.append(clock() - begin)
    return float(2 * num_bytes * iterations / min(seconds))
