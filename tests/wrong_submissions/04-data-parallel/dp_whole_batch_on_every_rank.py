"""Loads every row on every rank and trains each on the whole batch: the right parameters, with p
times the data read and the work done.

replaces: data_parallel
fails: test_data_parallel test_data_parallel_more
says: Each rank computes on all its own rows at once
"""

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader


def train_data_parallel(rank, world_size, make_model, dataset, steps, lr):
    model = make_model()
    with torch.no_grad():
        for p in model.parameters():
            dist.broadcast(p, src=0)
    loader = DataLoader(dataset, batch_size=len(dataset))
    for _ in range(steps):
        for x, y in loader:
            model.zero_grad()
            mse(model(x), y).backward()  # noqa: F821 - the setup cell imports it
            with torch.no_grad():
                for p in model.parameters():
                    dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
                    p -= lr * p.grad
    return [p.detach().clone() for p in model.parameters()]
