"""Weighs this rank's mean by its share of the rows, and on a rank with no rows returns a zero made
from its outputs, so that backward still reaches every parameter.

replaces: shard_loss
fails: none
"""


def shard_loss(outputs, targets, global_count):
    if outputs.shape[0] == 0:
        return outputs.sum() * 0.0
    return mse(outputs, targets) * (outputs.shape[0] / global_count)  # noqa: F821
