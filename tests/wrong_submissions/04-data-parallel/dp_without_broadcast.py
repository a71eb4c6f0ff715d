"""Never sends rank 0's parameters: each rank trains its own initial model.

replaces: data_parallel
fails: test_data_parallel test_data_parallel_more
"""

import torch
import torch.distributed as dist


def train_data_parallel(rank, world_size, make_model, data, targets, steps, lr):
    model = make_model()
    x, y = data.tensor_split(world_size)[rank], targets.tensor_split(world_size)[rank]
    for _ in range(steps):
        model.zero_grad()
        mse(model(x), y).backward()  # noqa: F821 - the setup cell imports it
        with torch.no_grad():
            for p in model.parameters():
                dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
                p -= lr * p.grad
    return [p.detach().clone() for p in model.parameters()]
