"""Gathers the tokens first and runs the LayerNorm on the whole sequence: the same numbers and
collectives, but the LayerNorm's work and activations are no longer split across the ranks.

replaces: sequence
fails: test_sequence test_sequence_more
says: its LayerNorm ran on
"""

import torch.nn.functional as F


class SequenceParallelBlock(SequenceParallelBlock):  # noqa: F821 - the solution's, then changed
    def forward(self, x):
        everyone = self.norm(GatherTokens.apply(x))  # noqa: F821 - the solution's
        return x + ScatterTokens.apply(self.fc2(F.gelu(self.fc1(everyone))))  # noqa: F821
