"""Keeps the clock's readings in float32 tensors, which round a reading of 100000 s to about 0.01 s.

replaces: benchmark
fails: test_benchmark test_benchmark_more
says: were the clock's readings kept in float32
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
    stop = clock()
    readings = torch.tensor([start, stop], device=get_device())  # float32, a tensor's default
    slowest = (readings[1:] - readings[:1]) / iterations
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return slowest.item()
