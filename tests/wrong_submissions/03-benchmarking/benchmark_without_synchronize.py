"""Never synchronises: on a GPU it would time how fast the calls are queued, not the collective.

replaces: benchmark
fails: test_benchmark test_benchmark_more
says: no synchronize() between the warm-up and the first clock reading
"""

import time

import torch
import torch.distributed as dist

from launcher import get_device


def benchmark(run, *, warmup=2, iterations=10, clock=time.perf_counter, synchronize=no_sync):  # noqa: F821
    for _ in range(warmup):
        run()
    dist.barrier()
    start = clock()
    for _ in range(iterations):
        run()
    elapsed = clock() - start
    slowest = torch.tensor([elapsed / iterations], dtype=torch.float64, device=get_device())
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return slowest.item()
