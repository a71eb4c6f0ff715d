"""Shards every other linear layer as a unit, so the whole model's unit holds the two left over:
they are gathered together.

replaces: torch_fsdp
fails: test_torch_fsdp test_torch_fsdp_more
says: its unit of sharding is larger than a layer
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
    linears = [layer for layer in model if isinstance(layer, nn.Linear)]
    for layer in linears[::2]:
        fully_shard(layer, mesh=mesh)  # noqa: F821 - the setup cell imports it
    fully_shard(model, mesh=mesh)  # noqa: F821
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    x, y = data.tensor_split(world_size)[rank], targets.tensor_split(world_size)[rank]
    for _ in range(steps):
        optimizer.zero_grad()
        mse(model(x), y).backward()  # noqa: F821 - the setup cell imports it
        optimizer.step()
    return [full_tensor(p).detach().clone() for p in model.parameters()]  # noqa: F821
