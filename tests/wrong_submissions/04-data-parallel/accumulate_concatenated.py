"""Concatenates the micro-batches and runs one forward and backward on all of them: the right
step, but with the memory of the whole batch, which micro-batches exist to avoid.

replaces: accumulate
fails: test_accumulate test_accumulate_more
says: they are not concatenated
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
    inputs = torch.cat([x for x, _ in micro_batches])
    targets = torch.cat([y for _, y in micro_batches])
    mse(model(inputs), targets).backward()  # noqa: F821 - the setup cell imports it
    with torch.no_grad():
        for p, handle in handles:
            handle.wait()
            p.grad /= dist.get_world_size()
            p -= lr * p.grad
    for hook in hooks:
        hook.remove()
