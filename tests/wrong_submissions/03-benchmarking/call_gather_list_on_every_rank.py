"""Passes a gather list on every rank, which torch allows on the root only.

replaces: collective_call
fails: test_collective_call_all
says: ``gather_list`` must NOT be specified on non-destination ranks
"""

import torch
import torch.distributed as dist

_right_collective_call = collective_call  # noqa: F821 - the solution cell defines it


def collective_call(name: str, size_bytes: int, world_size: int, device: torch.device):
    if name == "gather":
        chunk = size_bytes // (4 * world_size)
        part = torch.zeros(chunk, device=device)
        pieces = [torch.zeros(chunk, device=device) for _ in range(world_size)]
        return lambda: dist.gather(part, pieces, dst=0)
    return _right_collective_call(name, size_bytes, world_size, device)
