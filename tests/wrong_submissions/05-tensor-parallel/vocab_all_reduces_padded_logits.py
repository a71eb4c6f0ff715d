"""Rebuilds the whole logits on every rank with an all_reduce of zero-padded shards: no all_gather,
but the same tensor the split was meant to avoid.

replaces: vocab
fails: test_vocab test_vocab_more
says: elements into one all_reduce; its shard of the logits has
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F


def vocab_parallel_cross_entropy(logits, targets, vocab_start):
    width = logits.shape[1]
    everything = torch.zeros(logits.shape[0], width * dist.get_world_size())
    everything[:, vocab_start : vocab_start + width] = logits
    dist.all_reduce(everything)
    return F.cross_entropy(everything, targets)
