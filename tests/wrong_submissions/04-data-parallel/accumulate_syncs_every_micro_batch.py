"""Keeps the hooks on for every micro-batch, all_reducing the gradients after each one: the same
bytes k times over, and a sum that counts the early micro-batches several times.

replaces: accumulate
fails: test_accumulate test_accumulate_more
says: started before the last micro-batch's forward
"""

import torch
import torch.distributed as dist


def accumulate_and_step(model, micro_batches, lr):
    handles = []
    hooks = [
        p.register_post_accumulate_grad_hook(
            lambda q: handles.append((q, dist.all_reduce(q.grad, async_op=True)))
        )
        for p in model.parameters()
    ]
    model.zero_grad()
    for inputs, targets in micro_batches:
        (mse(model(inputs), targets) / len(micro_batches)).backward()  # noqa: F821
    with torch.no_grad():
        for _, handle in handles:
            handle.wait()
        for p in model.parameters():
            p.grad /= dist.get_world_size()
            p -= lr * p.grad
    for hook in hooks:
        hook.remove()
