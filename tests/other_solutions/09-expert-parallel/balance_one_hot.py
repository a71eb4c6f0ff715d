"""The fractions from one-hot rows, in float64.

replaces: balance
fails: none
"""

import torch
import torch.nn.functional as F


def balance_loss(logits, experts, alpha):
    n = logits.size(-1)
    f = F.one_hot(experts, n).sum((0, 1)).double() / experts.numel()
    p = F.softmax(logits, dim=-1).double().mean(0)
    return (alpha * n * torch.dot(f, p)).float()
