"""Subtracts one maximum, of the whole batch's logits, from every row: a row far below it has
every exponential underflow to 0, and its loss is -inf.

replaces: vocab
fails: test_vocab test_vocab_more
says: each row's own maximum
"""

import torch
import torch.distributed as dist


def vocab_parallel_cross_entropy(logits, targets, vocab_start):
    width = logits.shape[1]
    biggest = logits.max().reshape(1).clone()
    dist.all_reduce(biggest, op=dist.ReduceOp.MAX)
    total = torch.exp(logits - biggest).sum(dim=1)
    dist.all_reduce(total)
    local = targets - vocab_start
    mine = (local >= 0) & (local < width)
    target_logit = torch.where(mine, logits.gather(1, local.clamp(0, width - 1)[:, None]).squeeze(1), 0.0)
    dist.all_reduce(target_logit)
    return (biggest + torch.log(total) - target_logit).mean()
