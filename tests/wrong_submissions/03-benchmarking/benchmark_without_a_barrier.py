"""Starts each rank's clock when that rank gets there: no barrier after the warm-up.

replaces: benchmark
fails: test_benchmark test_benchmark_more
says: no dist.barrier() between the warm-up and the first clock reading
"""

import time

import torch
import torch.distributed as dist

from launcher import get_device


def benchmark(run, *, warmup=2, iterations=10, clock=time.perf_counter, synchronize=no_sync):  # noqa: F821
    for _ in range(warmup):
        run()
    synchronize()
    start = clock()
    for _ in range(iterations):
        run()
    synchronize()
    elapsed = clock() - start
    slowest = torch.tensor([elapsed / iterations], dtype=torch.float64, device=get_device())
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return slowest.item()
