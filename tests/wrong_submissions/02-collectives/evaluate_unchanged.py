"""The evaluation as given: ranks with fewer batches stop calling all_reduce, and the others hang.

replaces: evaluate
fails: test_evaluate test_evaluate_more
says: stop calling all_reduce when their own batches run out
"""

import torch
import torch.distributed as dist

BATCH = 4  # as in the notebook


def evaluate_fixed(rank: int, world_size: int, shard: torch.Tensor) -> float:
    totals = torch.zeros(2)
    for batch in shard.split(BATCH):
        losses = (batch - 1) ** 2
        step = torch.stack([losses.sum(), torch.tensor(float(len(batch)))])
        dist.all_reduce(step)
        totals += step
    return (totals[0] / totals[1]).item()
