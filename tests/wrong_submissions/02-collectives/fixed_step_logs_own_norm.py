"""Drops the norms' all_reduce: rank 0 prints only its own squared norm.

replaces: fixed
fails: test_fixed
"""

import torch
import torch.distributed as dist


def fixed_step(rank: int, world_size: int) -> torch.Tensor:
    grad = torch.arange(4.0) + rank
    lr = torch.tensor([0.5 if rank == 0 else 0.0])
    squared_norm = (grad**2).sum()
    dist.broadcast(lr, src=0)
    dist.all_reduce(grad)
    grad /= world_size
    if rank == 0:
        print(f"squared gradient norm: {squared_norm.item()}")
    return lr * grad
