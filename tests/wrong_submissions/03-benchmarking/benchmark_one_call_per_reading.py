"""Reads the clock around every call and keeps the fastest: the clock's overhead swamps small calls.

replaces: benchmark
fails: test_benchmark test_benchmark_more
says: a reading per call times the clock
"""

import time

import torch
import torch.distributed as dist

from launcher import get_device


def benchmark(run, *, warmup=2, iterations=10, clock=time.perf_counter, synchronize=no_sync):  # noqa: F821
    for _ in range(warmup):
        run()
    synchronize()
    dist.barrier()
    best = float("inf")
    for _ in range(iterations):
        start = clock()
        run()
        synchronize()
        best = min(best, clock() - start)
    slowest = torch.tensor([best], dtype=torch.float64, device=get_device())
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return slowest.item()
