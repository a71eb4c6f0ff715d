"""Makes every tensor on the CPU, whatever device it is given: on a GPU, NCCL would refuse them.

replaces: collective_call
fails: test_collective_call test_collective_call_all
says: carried a tensor that is not on the device it was given
"""

import torch

_right_collective_call = collective_call  # noqa: F821 - the solution cell defines it


def collective_call(name: str, size_bytes: int, world_size: int, device: torch.device):
    return _right_collective_call(name, size_bytes, world_size, torch.device("cpu"))
