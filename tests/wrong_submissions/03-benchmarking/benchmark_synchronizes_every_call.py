"""Synchronises after every timed call: on a GPU each call then also pays a round trip to the host.

replaces: benchmark
fails: test_benchmark test_benchmark_more
says: called synchronize() between timed calls
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
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return slowest.item()
