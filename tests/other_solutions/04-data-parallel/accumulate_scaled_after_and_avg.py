"""Back-propagates each micro-batch's own mean and divides by their number only after the
all_reduce (ReduceOp.AVG), waiting with torch.futures.wait_all; the hooks decide by counting
backwards left to run.

replaces: accumulate
fails: none
"""

import torch
import torch.distributed as dist


def accumulate_and_step(model, micro_batches, lr):
    params = [p for p in model.parameters() if p.requires_grad]
    left = {"backwards": len(micro_batches)}
    futures = []

    def hook(param):
        if left["backwards"] == 1:
            futures.append(dist.all_reduce(param.grad, op=dist.ReduceOp.AVG, async_op=True).get_future())

    handles = [p.register_post_accumulate_grad_hook(hook) for p in params]
    for p in params:
        p.grad = None
    for inputs, targets in micro_batches:
        mse(model(inputs), targets).backward()  # noqa: F821 - the setup cell imports it
        left["backwards"] -= 1
    for handle in handles:
        handle.remove()
    torch.futures.wait_all(futures)
    with torch.no_grad():
        for p in params:
            p.sub_(p.grad, alpha=lr / len(micro_batches))
