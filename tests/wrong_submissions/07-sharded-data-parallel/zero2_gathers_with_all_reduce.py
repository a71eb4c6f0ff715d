"""Reduce_scatters the gradients, but shares the updated shards with an all_reduce of a buffer
that is zero outside this rank's shard: right values, twice an all_gather's bytes.

replaces: zero2
fails: test_zero2 test_zero2_more
"""

import torch.distributed as dist


def all_gather_single(output, shard):  # noqa: F811 - in place of the setup cell's
    output.zero_()
    rank = dist.get_rank()
    output[rank * shard.numel() : (rank + 1) * shard.numel()] = shard
    dist.all_reduce(output)
