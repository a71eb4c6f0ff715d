"""Sums the gradients over the ranks and steps with the sum: world_size times too large a step.

replaces: data_parallel
fails: test_data_parallel test_data_parallel_more
says: sum the gradients over the ranks without dividing by the world size
"""

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler


def train_data_parallel(rank, world_size, make_model, dataset, steps, lr):
    model = make_model()
    with torch.no_grad():
        for p in model.parameters():
            dist.broadcast(p, src=0)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=False)
    loader = DataLoader(dataset, batch_size=len(dataset) // world_size, sampler=sampler)
    for _ in range(steps):
        for x, y in loader:
            model.zero_grad()
            mse(model(x), y).backward()  # noqa: F821 - the setup cell imports it
            with torch.no_grad():
                for p in model.parameters():
                    dist.all_reduce(p.grad)
                    p -= lr * p.grad
    return [p.detach().clone() for p in model.parameters()]
