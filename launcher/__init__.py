"""Run a function on N torch.distributed ranks, from a notebook cell, a script, a test, or torchrun.

from launcher import launch

def all_reduce_demo(rank: int, world_size: int):
    t = torch.tensor([0.0, 1, 2, 3]) + rank
    dist.all_reduce(t)
    return t

results = launch(all_reduce_demo, world_size=4)  # one entry per rank
"""

from .call import launch
from .errors import LaunchError, LaunchHang, RankException, RankFailure
from .forkserver import preload, shutdown
from .rank import get_device

__all__ = [
    "LaunchError",
    "LaunchHang",
    "RankException",
    "RankFailure",
    "get_device",
    "launch",
    "preload",
    "shutdown",
]
