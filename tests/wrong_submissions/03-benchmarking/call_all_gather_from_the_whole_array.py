"""Gives all_gather the whole array as each rank's input: world_size times the data asked for.

replaces: collective_call
fails: test_collective_call test_collective_call_all
says: make each rank's chunk the whole array
"""

import torch

_right_collective_call = collective_call  # noqa: F821 - the solution cell defines it


def collective_call(name: str, size_bytes: int, world_size: int, device: torch.device):
    if name == "all_gather":
        chunk = size_bytes // (4 * world_size)
        part = torch.zeros(world_size * chunk, device=device)
        whole = torch.zeros(world_size * world_size * chunk, device=device)
        return lambda: all_gather_single(whole, part)  # noqa: F821 - the setup cell imports it
    return _right_collective_call(name, size_bytes, world_size, device)
