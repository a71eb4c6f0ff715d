"""torch's older, reentrant checkpointing.

replaces: checkpoint
fails: none
"""

from torch.utils.checkpoint import checkpoint_sequential


def checkpointed(layers, x, segments):
    return checkpoint_sequential(layers, segments, x, use_reentrant=True)


def checkpoint_costs(num_layers, segments):
    return (segments - 1 + num_layers // segments, num_layers - num_layers // segments)
