"""Concatenates the micro-batches and runs one forward and backward on all of them: the right
step, but with the memory of the whole batch, which micro-batches exist to avoid.

replaces: accumulate
fails: test_accumulate test_accumulate_more
"""

import torch
import torch.distributed as dist


def accumulate_and_step(model, micro_batches, lr):
    model.zero_grad()
    inputs = torch.cat([x for x, _ in micro_batches])
    targets = torch.cat([y for _, y in micro_batches])
    mse(model(inputs), targets).backward()  # noqa: F821
    with torch.no_grad():
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= dist.get_world_size()
            p -= lr * p.grad
