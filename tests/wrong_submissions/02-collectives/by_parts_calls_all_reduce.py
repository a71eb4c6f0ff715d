"""Calls all_reduce itself instead of building it from reduce_scatter and all_gather.

replaces: by_parts
fails: test_by_parts
says: it should call reduce_scatter once and all_gather once (and no all_reduce)
"""

import torch
import torch.distributed as dist


def all_reduce_by_parts(tensor: torch.Tensor) -> None:
    dist.all_reduce(tensor)
