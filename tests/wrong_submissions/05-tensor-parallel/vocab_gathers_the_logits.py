"""Gathers the whole vocabulary's logits on every rank, which is what splitting them avoids.

replaces: vocab
fails: test_vocab test_vocab_more
says: elements into one all_gather; its shard of the logits has
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F


def vocab_parallel_cross_entropy(logits, targets, vocab_start):
    pieces = [torch.empty_like(logits) for _ in range(dist.get_world_size())]
    dist.all_gather(pieces, logits.contiguous())
    return F.cross_entropy(torch.cat(pieces, dim=1), targets)
