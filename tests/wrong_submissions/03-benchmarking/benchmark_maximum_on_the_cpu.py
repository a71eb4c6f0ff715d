"""Takes the maximum over ranks on a tensor made without a device: Gloo accepts it, NCCL would not.

replaces: benchmark
fails: test_benchmark test_benchmark_more
says: carried a tensor made without the rank's device
"""

import time

import torch
import torch.distributed as dist


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
    slowest = torch.tensor([elapsed / iterations], dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return slowest.item()
