"""Shuffles with DistributedSampler (the same seed on every rank, a new epoch each step), sums and
divides, steps with torch.optim.SGD, and broadcasts asynchronously before waiting on every handle.

replaces: data_parallel
fails: none
"""

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler


def train_data_parallel(rank, world_size, make_model, dataset, steps, lr):
    model = make_model()
    handles = [dist.broadcast(p.data, src=0, async_op=True) for p in model.parameters()]
    for handle in handles:
        handle.wait()
    sampler = DistributedSampler(dataset, world_size, rank, shuffle=True, seed=1234)
    loader = DataLoader(dataset, batch_size=len(dataset) // world_size, sampler=sampler)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for step in range(steps):
        sampler.set_epoch(step)
        (inputs, targets) = next(iter(loader))
        optimizer.zero_grad()
        mse(model(inputs), targets).backward()  # noqa: F821 - the setup cell imports it
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad.div_(world_size)
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()]
