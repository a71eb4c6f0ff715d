"""Uses checkpoint_sequential, which runs its last segment normally, but predicts the costs of
checkpointing every segment.

replaces: checkpoint
fails: test_checkpoint
"""

from torch.utils.checkpoint import checkpoint_sequential


def checkpointed(layers, x, segments):
    return checkpoint_sequential(layers, segments, x, use_reentrant=False)


def checkpoint_costs(num_layers, segments):
    return (segments, num_layers)
