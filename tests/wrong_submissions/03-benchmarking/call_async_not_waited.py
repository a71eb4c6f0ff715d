"""Starts each collective with async_op=True and never waits: the call returns before it has finished.

replaces: collective_call
fails: test_collective_call test_collective_call_all
says: came back before the other ranks had even called all_reduce
"""

import torch
import torch.distributed as dist


def collective_call(name: str, size_bytes: int, world_size: int, device: torch.device):
    chunk = size_bytes // (4 * world_size)
    whole = torch.zeros(world_size * chunk, device=device)
    part = torch.zeros(chunk, device=device)
    pieces = list(whole.split(chunk)) if chunk else [whole[:0]] * world_size
    received = torch.empty_like(whole)
    root = dist.get_rank() == 0
    calls = {
        "all_reduce": lambda: dist.all_reduce(whole, async_op=True),
        "broadcast": lambda: dist.broadcast(whole, src=0, async_op=True),
        "reduce": lambda: dist.reduce(whole, dst=0, async_op=True),
        "all_gather": lambda: all_gather_single(whole, part, async_op=True),  # noqa: F821
        "reduce_scatter": lambda: reduce_scatter_single(part, whole, async_op=True),  # noqa: F821
        "gather": lambda: dist.gather(part, pieces if root else None, dst=0, async_op=True),
        "scatter": lambda: dist.scatter(part, pieces if root else None, src=0, async_op=True),
        "all_to_all": lambda: dist.all_to_all_single(received, whole, async_op=True),
    }
    return calls[name]
