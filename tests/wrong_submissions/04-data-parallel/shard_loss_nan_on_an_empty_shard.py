"""Weighs this rank's mean by its share of the rows: right gradients, but on a rank with no rows the
mean of nothing is NaN, and NaN times 0 rows is still NaN.

replaces: shard_loss
fails: test_shard_loss
says: returned a loss of nan
"""


def shard_loss(outputs, targets, global_count):
    return mse(outputs, targets) * outputs.shape[0] / global_count  # noqa: F821
