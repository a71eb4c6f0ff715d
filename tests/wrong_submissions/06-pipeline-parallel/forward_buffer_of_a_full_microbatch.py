"""Receives every micro-batch into a buffer of microbatch_size rows, as the lecture allocates it,
and sends the last, smaller one padded to that size.

replaces: forward
fails: test_forward test_forward_more
says: ran its layers on inputs of [4, 4, 4] rows
"""

import torch
import torch.distributed as dist


def pipeline_forward(stage, inputs, batch_size, microbatch_size):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    outputs = []
    for start in range(0, batch_size, microbatch_size):
        if rank == 0:
            x = torch.zeros(microbatch_size, DIM)  # noqa: F821 - the notebook's
            chunk = inputs[start : start + microbatch_size]
            x[: len(chunk)] = chunk
        else:
            x = torch.zeros(microbatch_size, DIM)  # noqa: F821
            dist.recv(x, rank - 1)
        y = stage(x)
        if rank < world_size - 1:
            dist.send(y, rank + 1)
        else:
            outputs.append(y)
    return torch.cat(outputs)[:batch_size] if rank == world_size - 1 else None
