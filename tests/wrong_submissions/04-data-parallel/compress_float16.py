"""Compresses to float16, not bfloat16: as many bytes, but five bits of exponent, so large or tiny
gradients overflow or vanish.

replaces: compress
fails: test_compress test_compress_more
says: the all_reduces carried float16
"""

import torch
import torch.distributed as dist


def bf16_compress(state, bucket):
    buffer = bucket.buffer()
    compressed = buffer.to(torch.float16).div_(dist.get_world_size())
    future = dist.all_reduce(compressed, async_op=True).get_future()
    return future.then(lambda done: buffer.copy_(done.value()[0]))
