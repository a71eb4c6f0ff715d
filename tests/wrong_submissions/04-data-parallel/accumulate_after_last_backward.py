"""Accumulates without communicating, then all_reduces every gradient after the last backward:
once per step, but none of it overlaps with backward.

replaces: accumulate
fails: test_accumulate test_accumulate_more
says: started after backward had computed every gradient
"""

import torch
import torch.distributed as dist


def accumulate_and_step(model, micro_batches, lr):
    model.zero_grad()
    for inputs, targets in micro_batches:
        (mse(model(inputs), targets) / len(micro_batches)).backward()  # noqa: F821
    with torch.no_grad():
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= dist.get_world_size()
            p -= lr * p.grad
