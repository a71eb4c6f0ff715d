"""`launch` under torchrun: run the function once, on this process's rank, in torchrun's group.

So a function written in a notebook scales to many GPUs and nodes with torchrun, an existing
engine, rather than with the launcher's own processes.
"""

from __future__ import annotations

import atexit
import os
import warnings
from collections.abc import Callable
from typing import Any


def under_torchrun() -> bool:
    """Started by torchrun (or a launcher that sets everything torchrun does)."""
    env = os.environ
    keys = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    return "TORCHELASTIC_RUN_ID" in env or all(k in env for k in keys)


def local_world_size() -> int:
    """How many of torchrun's processes share this machine (its GPUs)."""
    return int(os.environ.get("LOCAL_WORLD_SIZE", "1"))


def run_in_torchrun_rank(
    fn: Callable[..., Any], world_size: int, args: tuple, kwargs: dict, backend: str
) -> Any:
    """Run fn on this process's rank in torchrun's group (created with ``backend`` if needed)."""
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend)
        atexit.register(_destroy_process_group)
    rank, size = dist.get_rank(), dist.get_world_size()
    if world_size != size:
        warnings.warn(
            f"launch(..., world_size={world_size}) runs on the {size} ranks that torchrun started.",
            stacklevel=3,
        )
    return fn(rank, size, *args, **kwargs)


def _destroy_process_group() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
