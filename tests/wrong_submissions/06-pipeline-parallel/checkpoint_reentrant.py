"""torch's older, reentrant checkpointing, where the exercise asks for checkpointing written by
hand; on a first stage, whose input needs no gradient, it also leaves every checkpointed segment's
parameters without a gradient.

replaces: checkpoint
fails: test_checkpoint
says: ran torch's own reentrant checkpointing
"""

from torch.utils.checkpoint import checkpoint_sequential


def checkpointed(layers, x, segments):
    return checkpoint_sequential(layers, segments, x, use_reentrant=True)


def checkpoint_costs(num_layers, segments):
    return (segments - 1 + num_layers // segments, num_layers - num_layers // segments)
