"""Applies fully_shard to the whole model only: one unit, gathered whole at once.

replaces: torch_fsdp
fails: test_torch_fsdp test_torch_fsdp_more
says: its unit of sharding is larger than a layer
"""

import torch
import torch.distributed as dist


def train_with_fully_shard(rank, world_size, make_model, data, targets, steps, lr):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    model = make_model()
    with torch.no_grad():
        for p in model.parameters():
            dist.broadcast(p, src=0)
    fully_shard(model, mesh=init_device_mesh("cpu", (world_size,)))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    x, y = data.tensor_split(world_size)[rank], targets.tensor_split(world_size)[rank]
    for _ in range(steps):
        optimizer.zero_grad()
        mse(model(x), y).backward()  # noqa: F821 - the setup cell imports it
        optimizer.step()
    return [full_tensor(p).detach().clone() for p in model.parameters()]  # noqa: F821 - the setup cell imports it
