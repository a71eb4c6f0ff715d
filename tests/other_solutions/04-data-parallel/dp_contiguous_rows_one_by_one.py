"""Takes a contiguous block of rows, reads them one at a time through a Subset and stacks them,
and averages all the gradients at once in a flat buffer.

replaces: data_parallel
fails: none
"""

import torch
import torch.distributed as dist
from torch.utils.data import Subset


def train_data_parallel(rank, world_size, make_model, dataset, steps, lr):
    model = make_model()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    dist.broadcast(flat, src=0)
    torch.nn.utils.vector_to_parameters(flat, model.parameters())
    share = len(dataset) // world_size
    mine = Subset(dataset, range(rank * share, (rank + 1) * share))
    for _ in range(steps):
        rows = [mine[i] for i in range(len(mine))]
        x, y = torch.stack([r[0] for r in rows]), torch.stack([r[1] for r in rows])
        model.zero_grad()
        mse(model(x), y).backward()  # noqa: F821 - the setup cell imports it
        grads = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        dist.all_reduce(grads)
        with torch.no_grad():
            offset = 0
            for p in model.parameters():
                p -= lr * grads[offset : offset + p.numel()].view_as(p) / world_size
                offset += p.numel()
    return [p.detach().clone() for p in model.parameters()]
