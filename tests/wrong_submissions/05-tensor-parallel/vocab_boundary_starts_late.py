"""Starts each rank's share of the vocabulary one entry late (>): a target at a shard's first entry is lost.

replaces: vocab
fails: test_vocab test_vocab_more
says: let no rank claim the first entry of its own shard
"""

import torch
import torch.distributed as dist


def vocab_parallel_cross_entropy(logits, targets, vocab_start):
    largest = logits.max(dim=1).values
    dist.all_reduce(largest, op=dist.ReduceOp.MAX)
    shifted = logits - largest[:, None]
    total = shifted.exp().sum(dim=1)
    dist.all_reduce(total)
    local = targets - vocab_start
    here = (local > 0) & (local < logits.shape[1])
    picked = shifted.gather(1, local.clamp(0, logits.shape[1] - 1)[:, None])[:, 0]
    target_logit = torch.where(here, picked, 0.0)
    dist.all_reduce(target_logit)
    return (total.log() - target_logit).mean()
