"""The factor N is left out.

replaces: balance
fails: test_balance test_balance_more
says: leave out the factor N
"""

import torch


def balance_loss(logits, experts, alpha):
    n = logits.shape[1]
    f = torch.bincount(experts.flatten(), minlength=n) / experts.numel()
    p = logits.softmax(-1).mean(0)
    return alpha * 1 * (f * p).sum()
