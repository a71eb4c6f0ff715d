"""Times as the lecture does: one untimed call, then the timed calls with the barrier inside the window.

replaces: benchmark
fails: test_benchmark test_benchmark_more
says: called dist.barrier() between the clock readings
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
    dist.barrier()
    elapsed = clock() - start
    slowest = torch.tensor([elapsed / iterations], dtype=torch.float64, device=get_device())
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return slowest.item()
