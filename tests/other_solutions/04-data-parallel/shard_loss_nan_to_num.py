"""Weighs this rank's mean by its share of the rows, the NaN of an empty shard's mean turned into 0.

replaces: shard_loss
fails: none
"""

import torch


def shard_loss(outputs, targets, global_count):
    share = outputs.shape[0] / global_count
    return torch.nan_to_num(((outputs - targets) ** 2).mean()) * share
