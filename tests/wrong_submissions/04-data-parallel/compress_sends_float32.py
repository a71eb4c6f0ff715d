"""Averages the bucket in its own dtype: right values, but no compression, so the same bytes as
DDP's own all_reduce.

replaces: compress
fails: test_compress test_compress_more
says: the all_reduces carried float32
"""

import torch.distributed as dist


def bf16_compress(state, bucket):
    buffer = bucket.buffer().div_(dist.get_world_size())
    return dist.all_reduce(buffer, async_op=True).get_future().then(lambda done: done.value()[0])
