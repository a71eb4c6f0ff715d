"""Computes with its shards, but keeps the whole fc1 and fc2 it was given as submodules: every
rank holds every weight.

replaces: sequence
fails: test_sequence test_sequence_more
says: Keep only this rank's share
"""


class SequenceParallelBlock(SequenceParallelBlock):  # noqa: F821 - the solution's, then changed
    def __init__(self, norm, fc1, fc2, rank, world_size):
        super().__init__(norm, fc1, fc2, rank, world_size)
        self.whole_fc1, self.whole_fc2 = fc1, fc2
