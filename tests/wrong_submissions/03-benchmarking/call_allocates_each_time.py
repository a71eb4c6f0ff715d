"""Makes a new tensor inside every call, so the benchmark would time the allocation too.

replaces: collective_call
fails: test_collective_call test_collective_call_all
says: calling what it returns also runs torch's zeros
"""

import torch
import torch.distributed as dist

_right_collective_call = collective_call  # noqa: F821 - the solution cell defines it


def collective_call(name: str, size_bytes: int, world_size: int, device: torch.device):
    if name == "all_reduce":
        chunk = size_bytes // (4 * world_size)
        return lambda: dist.all_reduce(torch.zeros(world_size * chunk, device=device))
    return _right_collective_call(name, size_bytes, world_size, device)
