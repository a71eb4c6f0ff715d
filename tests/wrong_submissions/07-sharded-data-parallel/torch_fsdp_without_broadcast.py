"""Shards each rank's own model without first making the ranks' models equal.

replaces: torch_fsdp
fails: test_torch_fsdp test_torch_fsdp_more
says: leave each rank's model as it was made
"""

import torch
from torch import nn

from autograder.sharded_data_parallel import full_tensor


def train_with_fully_shard(rank, world_size, make_model, data, targets, steps, lr):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    model = make_model()
    mesh = init_device_mesh("cpu", (world_size,))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    x, y = data.tensor_split(world_size)[rank], targets.tensor_split(world_size)[rank]
    for _ in range(steps):
        optimizer.zero_grad()
        mse(model(x), y).backward()  # noqa: F821 - the setup cell imports it
        optimizer.step()
    return [full_tensor(p).detach().clone() for p in model.parameters()]
