"""No padding: breaks when the world size does not divide the number of elements.

replaces: by_parts
fails: test_by_parts
says: must be padded to a multiple of p
"""

import torch
import torch.distributed as dist


def all_reduce_by_parts(tensor: torch.Tensor) -> None:
    world_size = dist.get_world_size()
    flat = tensor.reshape(-1)
    mine = torch.empty(flat.numel() // world_size, dtype=tensor.dtype)
    dist.reduce_scatter_tensor(mine, flat)
    dist.all_gather_into_tensor(flat, mine)
