"""Checkpoints every segment, the last included, with checkpoint(); predicts its own costs.

replaces: checkpoint
fails: none
"""

from torch.utils.checkpoint import checkpoint


def checkpointed(layers, x, segments):
    size = len(layers) // segments
    for s in range(segments):
        x = checkpoint(layers[s * size : (s + 1) * size], x, use_reentrant=False)
    return x


def checkpoint_costs(num_layers, segments):
    return (segments, num_layers)
