"""Synchronises after each warm-up call, and again after the maximum over the ranks before reading
it: a synchronize outside the timed window measures nothing, and waiting for the maximum is right.

replaces: benchmark
fails: none
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
    synchronize()
    start = clock()
    for _ in range(iterations):
        run()
    synchronize()
    elapsed = clock() - start
    slowest = torch.tensor([elapsed / iterations], dtype=torch.float64, device=get_device())
    handle = dist.all_reduce(slowest, op=dist.ReduceOp.MAX, async_op=True)
    handle.wait()
    synchronize()  # the maximum is on the device: wait for it, then read it
    return float(slowest.cpu())
