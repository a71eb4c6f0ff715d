"""Sends bfloat16 and casts back, but never divides by the world size: DDP receives the sum.

replaces: compress
fails: test_compress test_compress_more
says: It is the sum over the ranks
"""

import torch
import torch.distributed as dist


def bf16_compress(state, bucket):
    buffer = bucket.buffer()
    compressed = buffer.to(torch.bfloat16)
    future = dist.all_reduce(compressed, async_op=True).get_future()
    return future.then(lambda done: buffer.copy_(done.value()[0]))
