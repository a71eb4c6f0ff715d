"""Leaves the LayerNorm's gradients as each rank computed them, from its own tokens only.

replaces: sequence
fails: test_sequence test_sequence_more
says: leave it with only what this rank's own tokens contribute
"""


class SequenceParallelBlock(SequenceParallelBlock):  # noqa: F821 - the solution's, then changed
    def reduce_norm_gradients(self):
        pass
