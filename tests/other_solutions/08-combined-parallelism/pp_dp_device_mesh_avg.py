"""Takes the data-parallel groups from a (dp, pp) DeviceMesh, reads its rows by index, averages
with ReduceOp.AVG and steps with torch.optim.SGD.

replaces: pp_dp
fails: none
"""

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh


def train_pp_dp(rank, world_size, dp, pp, make_model, dataset, steps, lr, micro_batches):
    mesh = init_device_mesh("cpu", (dp, pp), mesh_dim_names=("dp", "pp"))
    replica, index = mesh.get_local_rank("dp"), mesh.get_local_rank("pp")
    blocks = list(make_model().children())
    first, last = index * len(blocks) // pp, (index + 1) * len(blocks) // pp
    stage = torch.nn.Sequential(*blocks[first:last])
    optimizer = torch.optim.SGD(stage.parameters(), lr=lr)
    share = len(dataset) // dp
    x, y = dataset[list(range(replica * share, (replica + 1) * share))]
    for _ in range(steps):
        optimizer.zero_grad()
        run_gpipe(  # noqa: F821 - a locked cell defines it
            stage,
            x,
            y,
            micro_batches,
            share,
            rank - 1 if index else None,
            rank + 1 if index < pp - 1 else None,
        )
        for p in stage.parameters():
            dist.all_reduce(p.grad, op=dist.ReduceOp.AVG, group=mesh["dp"].get_group())
        optimizer.step()
    return [p.detach().clone() for p in stage.parameters()]
