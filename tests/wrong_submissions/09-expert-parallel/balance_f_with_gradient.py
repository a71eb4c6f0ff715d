"""f_i gets a straight-through gradient: the right value, the wrong gradient.

replaces: balance
fails: test_balance test_balance_more
says: the value is right but its gradient on the logits is not
"""

import torch


def balance_loss(logits, experts, alpha):
    n = logits.shape[1]
    soft = logits.softmax(-1).mean(0)
    f = torch.bincount(experts.flatten(), minlength=n) / experts.numel() + soft - soft.detach()
    p = logits.softmax(-1).mean(0)
    return alpha * n * (f * p).sum()
