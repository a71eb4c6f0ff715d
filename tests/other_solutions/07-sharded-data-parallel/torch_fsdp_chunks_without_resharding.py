"""Cuts the batch with chunk, keeps each unit whole from forward to backward
(reshard_after_forward=False), and finds the linear layers by named_children.

replaces: torch_fsdp
fails: none
"""

import torch
import torch.distributed as dist
from torch import nn


def train_with_fully_shard(rank, world_size, make_model, data, targets, steps, lr):
    from torch.distributed.device_mesh import init_device_mesh

    model = make_model()
    for p in model.parameters():
        dist.broadcast(p.data, src=0)
    mesh = init_device_mesh("cpu", (world_size,))
    for _, child in model.named_children():
        if isinstance(child, nn.Linear):
            fully_shard(child, mesh=mesh, reshard_after_forward=False)  # noqa: F821 - the setup cell imports it
    fully_shard(model, mesh=mesh, reshard_after_forward=False)  # noqa: F821
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    x, y = data.chunk(world_size)[rank], targets.chunk(world_size)[rank]
    for _ in range(steps):
        loss = mse(model(x), y)  # noqa: F821 - the setup cell imports it
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return [full_tensor(p).detach().clone() for p in model.parameters()]  # noqa: F821
