"""All-reduces a bfloat16 copy of the bucket, then hands DDP the bucket's own buffer, which still
holds this rank's gradients: the average never reaches them.

replaces: compress
fails: test_compress test_compress_more
says: It is this rank's own gradient
"""

import torch
import torch.distributed as dist


def bf16_compress(state, bucket):
    buffer = bucket.buffer()
    compressed = buffer.to(torch.bfloat16).div_(dist.get_world_size())
    future = dist.all_reduce(compressed, async_op=True).get_future()
    return future.then(lambda done: buffer)
