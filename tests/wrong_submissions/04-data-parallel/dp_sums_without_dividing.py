"""Sums the gradients over the ranks and steps with the sum: world_size times too large a step.

replaces: data_parallel
fails: test_data_parallel test_data_parallel_more
"""

import torch
import torch.distributed as dist


def train_data_parallel(rank, world_size, make_model, data, targets, steps, lr):
    model = make_model()
    with torch.no_grad():
        for p in model.parameters():
            dist.broadcast(p, src=0)
    x, y = data.tensor_split(world_size)[rank], targets.tensor_split(world_size)[rank]
    for _ in range(steps):
        model.zero_grad()
        mse(model(x), y).backward()  # noqa: F821 - the setup cell imports it
        with torch.no_grad():
            for p in model.parameters():
                dist.all_reduce(p.grad)
                p -= lr * p.grad
    return [p.detach().clone() for p in model.parameters()]
