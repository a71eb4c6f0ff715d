"""Treats everything rank 0 receives as data, as run_schedule's first stage could: its later chunks'
inputs need no gradient, so it would send none back, and rank p - 1 would wait for them forever.

replaces: run_interleaved
fails: test_run_interleaved test_run_interleaved_more
says: input needs no gradient
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F


def run_interleaved(chunks, order, inputs, targets, batch_size, num_microbatches):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    last_stage = world_size * len(chunks) - 1
    before, after = (rank - 1) % world_size, (rank + 1) % world_size
    rows = batch_size // num_microbatches
    alive, sending, loss = {}, [], torch.zeros(())
    for kind, i, c in order:
        virtual = c * world_size + rank
        if kind == "F":
            if virtual == 0:
                x = inputs[i * rows : (i + 1) * rows]
            else:
                x = torch.empty(rows, DIM)  # noqa: F821 - the notebook's
                dist.recv(x, src=before)
                x.requires_grad_(rank > 0)
            y = chunks[c](x)
            if virtual == last_stage:
                y = F.mse_loss(y, targets[i * rows : (i + 1) * rows]) / num_microbatches
                loss += y.detach()
            else:
                sending.append(dist.isend(y.detach(), dst=after))
            alive[i, c] = (x, y)
        else:
            x, y = alive.pop((i, c))
            if virtual == last_stage:
                y.backward()
            else:
                grad = torch.empty_like(y)
                dist.recv(grad, src=after)
                y.backward(grad)
            if rank > 0:
                sending.append(dist.isend(x.grad, dst=before))
    for work in sending:
        work.wait()
    return loss if rank == world_size - 1 else None
