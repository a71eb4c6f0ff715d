"""Returns each rank's own time: the collective has not finished until the slowest rank has.

replaces: benchmark
fails: test_benchmark test_benchmark_more
says: returned their own time
"""

import time

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
    return (clock() - start) / iterations
