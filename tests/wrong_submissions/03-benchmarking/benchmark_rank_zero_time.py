"""Reports rank 0's time on every rank, whether or not rank 0 was the slowest.

replaces: benchmark
fails: test_benchmark test_benchmark_more
says: every rank returned rank 0's time
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
    elapsed = torch.tensor([(clock() - start) / iterations], dtype=torch.float64, device=get_device())
    dist.broadcast(elapsed, src=0)
    return elapsed.item()
