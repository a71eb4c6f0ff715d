"""Wraps the model in DDP but feeds every rank the whole batch.

replaces: torch_ddp
fails: test_torch_ddp test_torch_ddp_more
"""

import torch
from torch import nn


def train_with_torch_ddp(rank, world_size, make_model, data, targets, steps, lr):
    ddp = nn.parallel.DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(ddp.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        mse(ddp(data), targets).backward()  # noqa: F821 - the setup cell imports it
        optimizer.step()
    return [p.detach().clone() for p in ddp.module.parameters()]
