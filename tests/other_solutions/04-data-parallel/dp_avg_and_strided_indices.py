"""Reads its rows by index (rank, rank + p, ...) in one request, all_reduces with ReduceOp.AVG,
and makes the copies equal by broadcasting the state dict.

replaces: data_parallel
fails: none
"""

import torch
import torch.distributed as dist


def train_data_parallel(rank, world_size, make_model, dataset, steps, lr):
    model = make_model()
    for tensor in model.state_dict().values():
        dist.broadcast(tensor, src=0)
    x, y = dataset[list(range(rank, len(dataset), world_size))]
    for _ in range(steps):
        for p in model.parameters():
            p.grad = None
        mse(model(x), y).backward()  # noqa: F821 - the setup cell imports it
        with torch.no_grad():
            for p in model.parameters():
                dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
                p.add_(p.grad, alpha=-lr)
    return [p.detach().clone() for p in model.parameters()]
