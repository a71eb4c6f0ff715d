"""Never clears .grad: from the second step on, the previous step's averaged gradients are added to
the new ones.

replaces: accumulate
fails: test_accumulate test_accumulate_more
says: leave the previous step's gradients in .grad
"""

import torch
import torch.distributed as dist


def accumulate_and_step(model, micro_batches, lr):
    handles, last = [], [False]

    def start(param):
        if last[0]:
            handles.append((param, dist.all_reduce(param.grad, async_op=True)))

    hooks = [p.register_post_accumulate_grad_hook(start) for p in model.parameters()]
    for i, (inputs, targets) in enumerate(micro_batches):
        last[0] = i == len(micro_batches) - 1
        (mse(model(inputs), targets) / len(micro_batches)).backward()  # noqa: F821
    with torch.no_grad():
        for p, handle in handles:
            handle.wait()
            p.grad /= dist.get_world_size()
            p -= lr * p.grad
    for hook in hooks:
        hook.remove()
