"""Reads every row of the dataset on every rank, as the lecture's ranks hold the whole batch, then
computes on its own slice: the right step, but each rank loads p times the data it uses.

replaces: data_parallel
fails: test_data_parallel test_data_parallel_more
says: the whole batch, as if it trained alone
"""

import torch
import torch.distributed as dist


def train_data_parallel(rank, world_size, make_model, dataset, steps, lr):
    model = make_model()
    with torch.no_grad():
        for p in model.parameters():
            dist.broadcast(p, src=0)
    rows = [dataset[i] for i in range(len(dataset))]
    data, targets = torch.stack([x for x, _ in rows]), torch.stack([y for _, y in rows])
    x, y = data.tensor_split(world_size)[rank], targets.tensor_split(world_size)[rank]
    for _ in range(steps):
        model.zero_grad()
        mse(model(x), y).backward()  # noqa: F821 - the setup cell imports it
        with torch.no_grad():
            for p in model.parameters():
                dist.all_reduce(p.grad)
                p.grad /= world_size
                p -= lr * p.grad
    return [p.detach().clone() for p in model.parameters()]
