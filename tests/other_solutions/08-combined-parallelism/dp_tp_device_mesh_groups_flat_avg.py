"""Takes the groups from a DeviceMesh, reads its rows by index, averages one flat buffer of the
shard's gradients with ReduceOp.AVG, and steps with torch.optim.SGD.

replaces: dp_tp
fails: none
"""

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh


def train_dp_tp(rank, world_size, dp, tp, make_model, dataset, steps, lr):
    mesh = init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp", "tp"))
    replica = mesh.get_local_rank("dp")
    model = TensorParallelMLP(make_model(), mesh["tp"].get_group(), mesh.get_local_rank("tp"), tp)  # noqa: F821
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    share = len(dataset) // dp
    x, y = dataset[list(range(replica * share, (replica + 1) * share))]
    for _ in range(steps):
        optimizer.zero_grad()
        mse(model(x), y).backward()  # noqa: F821 - the setup cell imports it
        flat = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        dist.all_reduce(flat, op=dist.ReduceOp.AVG, group=mesh["dp"].get_group())
        for p, g in zip(model.parameters(), flat.split([p.numel() for p in model.parameters()]), strict=True):
            p.grad.copy_(g.view_as(p))
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()]
