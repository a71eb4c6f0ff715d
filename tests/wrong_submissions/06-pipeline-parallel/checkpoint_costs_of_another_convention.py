"""Checkpoints every segment, the last one included, but predicts the costs of leaving the last
segment unchecked, as torch's checkpoint_sequential does.

replaces: checkpoint
fails: test_checkpoint
says: That is the cost of leaving the last segment unchecked
"""


def checkpoint_costs(num_layers, segments):
    return (segments - 1 + num_layers // segments, num_layers - num_layers // segments)
