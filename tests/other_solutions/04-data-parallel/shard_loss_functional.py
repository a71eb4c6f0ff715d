"""Sums the squared errors with torch's own loss function, then divides by the whole batch's
number of elements.

replaces: shard_loss
fails: none
"""

import torch.nn.functional as F


def shard_loss(outputs, targets, global_count):
    return F.mse_loss(outputs, targets, reduction="sum") / (global_count * outputs.shape[1])
