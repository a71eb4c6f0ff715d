"""The maximum started with async_op=True and waited on through its future; a float32 duration.

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
    start = clock()
    for _ in range(iterations):
        run()
    synchronize()
    per_call = (clock() - start) / iterations
    slowest = torch.full((1,), per_call, device=get_device())
    work = dist.all_reduce(slowest, op=dist.ReduceOp.MAX, async_op=True)
    torch.futures.wait_all([work.get_future()])
    return float(slowest[0])
