"""Agrees on the number of steps, but a rank with no samples returns before that all_reduce:
the others hang as soon as a rank's shard is empty.

replaces: evaluate
fails: test_evaluate_more
says: a rank with nothing to evaluate must still join every collective
"""

import torch
import torch.distributed as dist

BATCH = 4  # as in the notebook


def evaluate_fixed(rank: int, world_size: int, shard: torch.Tensor) -> float:
    if len(shard) == 0:
        return float("nan")  # nothing to evaluate here
    batches = list(shard.split(BATCH))
    steps = torch.tensor([len(batches)])
    dist.all_reduce(steps, op=dist.ReduceOp.MAX)
    totals = torch.zeros(2)
    for i in range(int(steps.item())):
        batch = batches[i] if i < len(batches) else torch.zeros(0)
        losses = (batch - 1) ** 2
        step = torch.stack([losses.sum(), torch.tensor(float(len(batch)))])
        dist.all_reduce(step)
        totals += step
    return (totals[0] / totals[1]).item()
