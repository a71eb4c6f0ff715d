"""All-reduces the gradients after every micro-batch: the same bytes k times over.

replaces: accumulate
fails: test_accumulate test_accumulate_more
"""

import torch
import torch.distributed as dist


def accumulate_and_step(model, micro_batches, lr):
    model.zero_grad()
    for inputs, targets in micro_batches:
        before = [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in model.parameters()]
        (mse(model(inputs), targets) / len(micro_batches)).backward()  # noqa: F821
        with torch.no_grad():
            for p, b in zip(model.parameters(), before, strict=True):
                new = p.grad - b
                dist.all_reduce(new)
                p.grad.copy_(b + new / dist.get_world_size())
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad
