"""Uses ReduceOp.AVG and hands DDP the bfloat16 result as it is: DDP copies it into the gradients,
casting it to their dtype.

replaces: compress
fails: none
"""

import torch
import torch.distributed as dist


def bf16_compress(state, bucket):
    compressed = bucket.buffer().to(torch.bfloat16)
    work = dist.all_reduce(compressed, op=dist.ReduceOp.AVG, async_op=True)
    return work.get_future().then(lambda done: done.value()[0])
