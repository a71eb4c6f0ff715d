"""Makes int64 tensors, twice the bytes per element of the float32 the benchmark counts.

replaces: collective_call
fails: test_collective_call test_collective_call_all
says: carried torch.int64 tensors; the benchmark asks for float32
"""

import torch
import torch.distributed as dist

_right_collective_call = collective_call  # noqa: F821 - the solution cell defines it


def collective_call(name: str, size_bytes: int, world_size: int, device: torch.device):
    chunk = size_bytes // (4 * world_size)
    whole = torch.zeros(world_size * chunk, dtype=torch.int64, device=device)
    part = torch.zeros(chunk, dtype=torch.int64, device=device)
    if name == "all_reduce":
        return lambda: dist.all_reduce(whole)
    if name == "all_gather":
        return lambda: all_gather_single(whole, part)  # noqa: F821 - the setup cell imports it
    return _right_collective_call(name, size_bytes, world_size, device)
