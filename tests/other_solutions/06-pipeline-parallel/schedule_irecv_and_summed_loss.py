"""Receives with irecv, scales each micro-batch's summed squared error by the whole batch's size,
and sends gradients with isend, waiting on everything at the end.

replaces: schedule
fails: none
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F


def run_schedule(stage, order, inputs, targets, batch_size, num_microbatches):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    rows = batch_size // num_microbatches
    kept, works, total = {}, [], 0.0
    for kind, i in order:
        if kind == "F":
            if rank == 0:
                x = inputs.chunk(num_microbatches)[i]
            else:
                x = torch.zeros(rows, DIM)  # noqa: F821 - the notebook's
                dist.irecv(x, src=rank - 1).wait()
                x.requires_grad = True
            out = stage(x)
            if rank == world_size - 1:
                out = F.mse_loss(out, targets.chunk(num_microbatches)[i], reduction="sum") / targets.numel()
                total = total + out.item()
            else:
                works.append(dist.isend(out.detach().clone(), dst=rank + 1))
            kept[i] = (x, out)
        else:
            x, out = kept.pop(i)
            if rank == world_size - 1:
                out.backward()
            else:
                grad = torch.zeros_like(out)
                dist.irecv(grad, src=rank + 1).wait()
                torch.autograd.backward(out, grad)
            if rank > 0:
                works.append(dist.isend(x.grad.clone(), dst=rank - 1))
    for work in works:
        work.wait()
    return torch.tensor(total) if rank == world_size - 1 else None
