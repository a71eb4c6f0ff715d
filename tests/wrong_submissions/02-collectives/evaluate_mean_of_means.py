"""No hang, but averages the ranks' own means: wrong when the ranks hold different numbers of samples.

replaces: evaluate
fails: test_evaluate test_evaluate_more
says: average each rank's own mean
"""

import torch
import torch.distributed as dist


def evaluate_fixed(rank: int, world_size: int, shard: torch.Tensor) -> float:
    mean = ((shard - 1) ** 2).mean() if len(shard) else torch.tensor(0.0)
    dist.all_reduce(mean)
    return mean.item() / world_size
