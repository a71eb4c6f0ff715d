"""The lecture's blocking send and recv, with the last micro-batch's rows computed on every rank.

replaces: forward
fails: none
"""

import torch
import torch.distributed as dist


def pipeline_forward(stage, inputs, batch_size, microbatch_size):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    sizes = [microbatch_size] * (batch_size // microbatch_size)
    if batch_size % microbatch_size:
        sizes.append(batch_size % microbatch_size)
    pieces = inputs.split(sizes) if rank == 0 else None
    outputs = []
    for i, rows in enumerate(sizes):
        x = pieces[i] if rank == 0 else torch.zeros(rows, DIM)  # noqa: F821 - the notebook's
        if rank > 0:
            dist.recv(x, src=rank - 1)
        x = stage(x)
        if rank == world_size - 1:
            outputs.append(x)
        else:
            dist.send(x, dst=rank + 1)
    return torch.cat(outputs) if outputs else None
