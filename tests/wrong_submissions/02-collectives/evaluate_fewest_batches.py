"""Stops every rank after the fewest batches any rank has: no hang, but samples are left out.

replaces: evaluate
fails: test_evaluate test_evaluate_more
says: stop every rank after the fewest batches any rank has
"""

import torch
import torch.distributed as dist

BATCH = 4  # as in the notebook


def evaluate_fixed(rank: int, world_size: int, shard: torch.Tensor) -> float:
    batches = list(shard.split(BATCH))
    steps = torch.tensor([len(batches)])
    dist.all_reduce(steps, op=dist.ReduceOp.MIN)
    totals = torch.zeros(2)
    for batch in batches[: int(steps.item())]:
        losses = (batch - 1) ** 2
        step = torch.stack([losses.sum(), torch.tensor(float(len(batch)))])
        dist.all_reduce(step)
        totals += step
    return (totals[0] / totals[1]).item()
