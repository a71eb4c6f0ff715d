"""Adds up the micro-batches' gradients without dividing by their number: k times too large a step.

replaces: accumulate
fails: test_accumulate test_accumulate_more
"""

import torch
import torch.distributed as dist


def accumulate_and_step(model, micro_batches, lr):
    model.zero_grad()
    for inputs, targets in micro_batches:
        mse(model(inputs), targets).backward()  # noqa: F821 - the setup cell imports it
    with torch.no_grad():
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= dist.get_world_size()
            p -= lr * p.grad
