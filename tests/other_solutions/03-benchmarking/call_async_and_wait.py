"""Every collective started with async_op=True, then waited on inside the call.

replaces: collective_call
fails: none
"""

import torch
import torch.distributed as dist


def collective_call(name, size_bytes, world_size, device):
    chunk = size_bytes // (4 * world_size)
    whole = torch.empty(world_size * chunk, device=device).fill_(1.0)
    part = whole.new_zeros(chunk)
    received = torch.empty_like(whole)
    root = dist.get_rank() == 0
    pieces = list(whole.split(chunk)) if root and chunk else [whole[:0] for _ in range(world_size)]
    start = {
        "all_reduce": lambda: dist.all_reduce(whole, async_op=True),
        "broadcast": lambda: dist.broadcast(whole, src=0, async_op=True),
        "reduce": lambda: dist.reduce(whole, dst=0, async_op=True),
        "all_gather": lambda: all_gather_single(whole, part, async_op=True),  # noqa: F821
        "reduce_scatter": lambda: reduce_scatter_single(part, whole, async_op=True),  # noqa: F821
        "gather": lambda: dist.gather(part, pieces if root else None, dst=0, async_op=True),
        "scatter": lambda: dist.scatter(part, pieces if root else None, src=0, async_op=True),
        "all_to_all": lambda: dist.all_to_all_single(received, whole, async_op=True),
    }[name]

    def run():
        start().wait()

    return run
