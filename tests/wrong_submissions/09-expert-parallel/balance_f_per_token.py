"""f_i is the fraction of tokens, so with top-k the f_i sum to k.

replaces: balance
fails: test_balance test_balance_more
says: count f_i as a fraction of the tokens
"""

import torch


def balance_loss(logits, experts, alpha):
    n = logits.shape[1]
    f = torch.bincount(experts.flatten(), minlength=n) / len(experts)
    p = logits.softmax(-1).mean(0)
    return alpha * n * (f * p).sum()
