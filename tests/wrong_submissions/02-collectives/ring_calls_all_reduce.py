"""Calls the built-in all_reduce instead of sending and receiving.

replaces: ring
fails: test_ring test_ring_more
says: use only sends and receives
"""

import torch
import torch.distributed as dist


def ring_all_reduce(tensor: torch.Tensor) -> None:
    dist.all_reduce(tensor)
