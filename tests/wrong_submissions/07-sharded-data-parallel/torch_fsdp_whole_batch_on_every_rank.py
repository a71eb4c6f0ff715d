"""Shards the model right, but every rank trains on the whole batch: the same parameters, n times
the work.

replaces: torch_fsdp
fails: test_torch_fsdp test_torch_fsdp_more
says: (the whole batch)
"""

import torch
import torch.distributed as dist
from torch import nn


def train_with_fully_shard(rank, world_size, make_model, data, targets, steps, lr):
    from torch.distributed.device_mesh import init_device_mesh

    model = make_model()
    with torch.no_grad():
        for p in model.parameters():
            dist.broadcast(p, src=0)
    mesh = init_device_mesh("cpu", (world_size,))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)  # noqa: F821 - the setup cell imports it
    fully_shard(model, mesh=mesh)  # noqa: F821
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        mse(model(data), targets).backward()  # noqa: F821 - the setup cell imports it
        optimizer.step()
    return [full_tensor(p).detach().clone() for p in model.parameters()]  # noqa: F821
