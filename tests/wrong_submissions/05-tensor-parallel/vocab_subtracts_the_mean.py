"""Shifts each row by the mean of its logits, not the largest: one logit far above the rest overflows.

replaces: vocab
fails: test_vocab test_vocab_more
says: one logit is 200 above the rest of its row
"""

import torch
import torch.distributed as dist


def vocab_parallel_cross_entropy(logits, targets, vocab_start):
    mean = logits.sum(dim=1)
    dist.all_reduce(mean)
    mean /= logits.shape[1] * dist.get_world_size()
    shifted = logits - mean[:, None]
    total = shifted.exp().sum(dim=1)
    dist.all_reduce(total)
    local = targets - vocab_start
    here = (local >= 0) & (local < logits.shape[1])
    picked = shifted.gather(1, local.clamp(0, logits.shape[1] - 1)[:, None])[:, 0]
    target_logit = torch.where(here, picked, 0.0)
    dist.all_reduce(target_logit)
    return (total.log() - target_logit).mean()
