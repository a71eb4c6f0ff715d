"""Divides by the number of rows, not by the number of elements the mean runs over.

replaces: shard_loss
fails: test_shard_loss
says: divide by the number of rows but not by the number of outputs
"""


def shard_loss(outputs, targets, global_count):
    return ((outputs - targets) ** 2).sum() / global_count
