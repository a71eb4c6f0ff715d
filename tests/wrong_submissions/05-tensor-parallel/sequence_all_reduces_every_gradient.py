"""All-reduces every parameter's gradient, the shards' too, as data parallelism would.

replaces: sequence
fails: test_sequence test_sequence_more
says: all_reduce the shards' gradients too
"""

import torch.distributed as dist


class SequenceParallelBlock(SequenceParallelBlock):  # noqa: F821 - the solution's, then changed
    def reduce_norm_gradients(self):
        for parameter in self.parameters():
            dist.all_reduce(parameter.grad)
