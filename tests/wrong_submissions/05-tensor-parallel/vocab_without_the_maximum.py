"""Exponentiates the raw logits: exp(1000) is infinite in float32.

replaces: vocab
fails: test_vocab test_vocab_more
says: exp() overflows float32 above 88.7
"""

import torch
import torch.distributed as dist


def vocab_parallel_cross_entropy(logits, targets, vocab_start):
    total = logits.exp().sum(dim=1)
    dist.all_reduce(total)
    local = targets - vocab_start
    here = (local >= 0) & (local < logits.shape[1])
    picked = logits.gather(1, local.clamp(0, logits.shape[1] - 1)[:, None])[:, 0]
    target_logit = torch.where(here, picked, 0.0)
    dist.all_reduce(target_logit)
    return (total.log() - target_logit).mean()
