"""Gathers every rank's time (made on the CPU, moved to the device) and takes the largest; a NumPy float.

replaces: benchmark
fails: none
"""

import time

import numpy as np
import torch
import torch.distributed as dist

from launcher import get_device


def benchmark(run, *, warmup=2, iterations=10, clock=time.perf_counter, synchronize=no_sync):  # noqa: F821
    for _ in range(warmup):
        run()
    dist.barrier()
    synchronize()
    t0 = clock()
    for _ in range(iterations):
        run()
    synchronize()
    t1 = clock()
    mine = torch.tensor([t1 - t0], dtype=torch.float64).to(get_device())
    everyone = [torch.zeros_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, mine)
    return np.float64(max(t.item() for t in everyone) / iterations)
