"""One call to torch's checkpoint_sequential, with the costs it has: right numbers, but the
checkpointing is torch's, not written by hand.

replaces: checkpoint
fails: test_checkpoint
says: ran torch's own non-reentrant checkpointing
"""

from torch.utils.checkpoint import checkpoint_sequential


def checkpointed(layers, x, segments):
    return checkpoint_sequential(layers, segments, x, use_reentrant=False)


def checkpoint_costs(num_layers, segments):
    return (segments - 1 + num_layers // segments, num_layers - num_layers // segments)
