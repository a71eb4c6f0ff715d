"""Sends bfloat16 with a blocking all_reduce and returns a future already done: right values, but
backward stops in the hook until each bucket's communication is over.

replaces: compress
fails: test_compress test_compress_more
says: the hook waited on its all_reduce before backward was over
"""

import torch
import torch.distributed as dist


def bf16_compress(state, bucket):
    buffer = bucket.buffer()
    compressed = buffer.to(torch.bfloat16).div_(dist.get_world_size())
    dist.all_reduce(compressed)
    done = torch.futures.Future()
    done.set_result(buffer.copy_(compressed))
    return done
