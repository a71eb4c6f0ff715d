"""Gives each rank n // p + 1 elements, one more than needed when p divides n, padded with zeros.

replaces: by_parts
fails: none
"""

import torch
import torch.distributed as dist


def all_reduce_by_parts(tensor: torch.Tensor) -> None:
    p = dist.get_world_size()
    n = tensor.numel()
    share = n // p + 1
    padded = torch.zeros(share * p, dtype=tensor.dtype, device=tensor.device)
    padded[:n] = tensor.reshape(-1)
    mine = torch.empty(share, dtype=tensor.dtype, device=tensor.device)
    dist.reduce_scatter_tensor(mine, padded)
    dist.all_gather_into_tensor(padded, mine)
    tensor.copy_(padded[:n].reshape(tensor.shape))
