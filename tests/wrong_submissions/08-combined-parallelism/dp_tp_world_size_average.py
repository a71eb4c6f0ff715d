"""Averages the gradients over the world size, not over the data-parallel replicas: steps tp times
too short.

replaces: dp_tp
fails: test_dp_tp test_dp_tp_more
says: averaged over the world size
"""

import torch
import torch.distributed as dist


def train_dp_tp(rank, world_size, dp, tp, make_model, dataset, steps, lr):
    replica, shard = divmod(rank, tp)
    groups = {}
    tp_groups = [list(range(d * tp, (d + 1) * tp)) for d in range(dp)]
    dp_groups = [list(range(t, dp * tp, tp)) for t in range(tp)]
    for axis, members in (("tp", tp_groups), ("dp", dp_groups)):
        for ranks in members:
            group = dist.new_group(ranks)
            if rank in ranks:
                groups[axis] = group
    model = TensorParallelMLP(make_model(), groups["tp"], shard, tp)  # noqa: F821 - a locked cell defines it
    share = len(dataset) // dp
    x, y = dataset[replica * share : (replica + 1) * share]
    for _ in range(steps):
        model.zero_grad()
        mse(model(x), y).backward()  # noqa: F821 - the setup cell imports it
        with torch.no_grad():
            for p in model.parameters():
                dist.all_reduce(p.grad, group=groups["dp"])
                p -= lr * p.grad / world_size
    return [p.detach().clone() for p in model.parameters()]
