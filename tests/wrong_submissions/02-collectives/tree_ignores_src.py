"""Uses the rank instead of the rank relative to src: only right when src is 0.

replaces: tree
fails: test_tree test_tree_more
says: broadcast from rank 0 whatever src is
"""

import torch
import torch.distributed as dist


def tree_broadcast(tensor: torch.Tensor, src: int) -> None:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    mask = 1
    while mask < world_size:
        if rank < mask and rank + mask < world_size:
            dist.send(tensor, dst=rank + mask)
        elif mask <= rank < 2 * mask:
            dist.recv(tensor, src=rank - mask)
        mask *= 2
