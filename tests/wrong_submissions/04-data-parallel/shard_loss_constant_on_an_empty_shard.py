"""Returns a fresh zero on a rank with no rows: its share of the loss, but cut off from the model,
so backward gives its parameters no gradient for the all_reduce.

replaces: shard_loss
fails: test_shard_loss
says: backward gave parameters
"""

import torch


def shard_loss(outputs, targets, global_count):
    if outputs.shape[0] == 0:
        return torch.zeros((), requires_grad=True)
    return ((outputs - targets) ** 2).sum() / (global_count * outputs.shape[1])
