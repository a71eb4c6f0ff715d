"""Cuts the batch with torch.chunk into as many pieces as there are micro-batches: the pieces are
as equal as chunk can make them, not micro-batches of the size asked with a smaller last one (9
rows in micro-batches of 4 become 3, 3 and 3 rows). The outputs are right.

replaces: forward
fails: test_forward_more
says: the micro-batches have
"""

import math


def pipeline_forward(stage, inputs, batch_size, microbatch_size):
    rank, world_size = dist.get_rank(), dist.get_world_size()  # noqa: F821 - the notebook's
    pieces = math.ceil(batch_size / microbatch_size)
    sizes = [len(piece) for piece in torch.empty(batch_size).chunk(pieces)]  # noqa: F821
    starts = [sum(sizes[:k]) for k in range(len(sizes))]
    outputs, sending = [], []
    for start, rows in zip(starts, sizes, strict=True):
        if rank == 0:
            x = inputs[start : start + rows]
        else:
            x = torch.empty(rows, DIM)  # noqa: F821 - the notebook's
            dist.recv(x, src=rank - 1)  # noqa: F821
        y = stage(x)
        if rank == world_size - 1:
            outputs.append(y)
        else:
            sending.append(dist.isend(y, dst=rank + 1))  # noqa: F821
    for work in sending:
        work.wait()
    return torch.cat(outputs) if rank == world_size - 1 else None  # noqa: F821
