"""Fixes the order but keeps the norm's all_reduce inside `if rank == 0`: rank 0 hangs.

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
        dist.all_reduce(squared_norm)
        print(f"mean squared gradient norm over the ranks: {squared_norm.item() / world_size}")
    return lr * grad
