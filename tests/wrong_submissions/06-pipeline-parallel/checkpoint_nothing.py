"""Runs the layers without checkpointing and predicts that: every output kept, nothing recomputed.

replaces: checkpoint
fails: test_checkpoint
says: nothing was checkpointed
"""


def checkpointed(layers, x, segments):
    return layers(x)


def checkpoint_costs(num_layers, segments):
    return (num_layers, 0)
