"""Rows by index list, a plain SGD update of each parameter's local shard, and the whole tensors
through the course's torch_compat.full_tensor.

replaces: torch_2d
fails: none
"""

import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from autograder.torch_compat import full_tensor


def train_torch_2d(rank, world_size, dp, tp, make_model, dataset, steps, lr):
    mesh = init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp", "tp"))
    model = make_model()
    parallelize_module(model, mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
    fully_shard(model, mesh=mesh["dp"])
    replica = rank // tp
    share = len(dataset) // dp
    x, y = dataset[list(range(replica * share, (replica + 1) * share))]
    for _ in range(steps):
        for p in model.parameters():
            p.grad = None
        mse(model(x), y).backward()  # noqa: F821 - the setup cell imports it
        with torch.no_grad():
            for p in model.parameters():
                p.to_local().sub_(lr * p.grad.to_local())
    return [full_tensor(p).clone() for p in model.parameters()]
