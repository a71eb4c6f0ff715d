"""Takes the mean over this rank's own rows, so every shard weighs the same whatever its size.

replaces: shard_loss
fails: test_shard_loss
says: take the mean over this rank's shard
"""


def shard_loss(outputs, targets, global_count):
    return ((outputs - targets) ** 2).mean()
