"""Starts the clock before the warm-up, so the timed window includes its calls.

replaces: benchmark
fails: test_benchmark test_benchmark_more
says: calls before starting the clock
"""

import time

import torch
import torch.distributed as dist

from launcher import get_device


def benchmark(run, *, warmup=2, iterations=10, clock=time.perf_counter, synchronize=no_sync):  # noqa: F821
    synchronize()
    dist.barrier()
    start = clock()
    for _ in range(warmup + iterations):
        run()
    synchronize()
    elapsed = clock() - start
    slowest = torch.tensor([elapsed / iterations], dtype=torch.float64, device=get_device())
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return slowest.item()
