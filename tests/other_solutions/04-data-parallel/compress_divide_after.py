"""Sums in bfloat16, then divides and casts back in the callback, returning a new tensor rather
than writing into the bucket's buffer.

replaces: compress
fails: none
"""

import torch
import torch.distributed as dist


def bf16_compress(state, bucket):
    dtype, size = bucket.buffer().dtype, dist.get_world_size()
    compressed = bucket.buffer().to(torch.bfloat16)
    future = dist.all_reduce(compressed, async_op=True).get_future()
    return future.then(lambda done: done.value()[0].to(dtype) / size)
