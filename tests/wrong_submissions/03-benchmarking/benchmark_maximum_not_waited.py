"""Starts the maximum over ranks with async_op=True and reads the result without waiting for it.

replaces: benchmark
fails: test_benchmark test_benchmark_more
says: a handle from async_op=True must be waited on first
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
    start = clock()
    for _ in range(iterations):
        run()
    synchronize()
    elapsed = clock() - start
    slowest = torch.tensor([elapsed / iterations], dtype=torch.float64, device=get_device())
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX, async_op=True)
    return slowest.item()
