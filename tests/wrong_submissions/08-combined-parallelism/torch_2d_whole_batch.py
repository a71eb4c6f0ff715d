"""Every rank trains on the whole batch: right parameters, but no replica read only its rows.

replaces: torch_2d
fails: test_torch_2d test_torch_2d_more
says: read 6 of the 6 rows; each data-parallel replica reads
"""

import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


def train_torch_2d(rank, world_size, dp, tp, make_model, dataset, steps, lr):
    mesh = init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp", "tp"))
    model = make_model()
    parallelize_module(model, mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
    fully_shard(model, mesh=mesh["dp"])
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    x, y = dataset[:]
    for _ in range(steps):
        optimizer.zero_grad()
        mse(model(x), y).backward()  # noqa: F821 - the setup cell imports it
        optimizer.step()
    return [p.full_tensor().clone() for p in model.parameters()]
