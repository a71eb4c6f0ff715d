"""Tensors made on the CPU and moved to the device; the list forms of all_gather and reduce_scatter.

replaces: collective_call
fails: none
"""

import torch
import torch.distributed as dist


def collective_call(name, size_bytes, world_size, device):
    chunk = size_bytes // (4 * world_size)
    whole = torch.zeros(world_size * chunk).to(device)
    mine = torch.ones(chunk).to(device)
    parts = [p.to(device) for p in torch.zeros(world_size, chunk).unbind()]
    if name == "all_gather":
        return lambda: dist.all_gather(parts, mine)
    if name == "reduce_scatter":
        return lambda: dist.reduce_scatter(mine, parts)
    if name == "gather":
        return lambda: dist.gather(mine, parts if dist.get_rank() == 0 else None, dst=0)
    if name == "scatter":
        return lambda: dist.scatter(mine, parts if dist.get_rank() == 0 else None, src=0)
    if name == "all_to_all":
        out = whole.clone()
        return lambda: dist.all_to_all_single(out, whole)
    if name == "broadcast":
        return lambda: dist.broadcast(whole, 0)
    if name == "reduce":
        return lambda: dist.reduce(whole, 0)
    return lambda: dist.all_reduce(whole)
