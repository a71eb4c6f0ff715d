"""Drops the learning rate's broadcast: ranks other than 0 scale by their own 0.0.

replaces: fixed
fails: test_fixed
"""

import torch
import torch.distributed as dist


def fixed_step(rank: int, world_size: int) -> torch.Tensor:
    grad = torch.arange(4.0) + rank
    lr = torch.tensor([0.5 if rank == 0 else 0.0])
    squared_norm = (grad**2).sum()
    dist.all_reduce(grad)
    grad /= world_size
    dist.all_reduce(squared_norm)
    if rank == 0:
        print(f"mean squared gradient norm over the ranks: {squared_norm.item() / world_size}")
    return lr * grad
