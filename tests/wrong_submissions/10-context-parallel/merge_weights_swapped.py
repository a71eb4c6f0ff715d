"""Gives each side the other's share of the denominator.

replaces: merge
fails: test_merge test_merge_more
says: swap the weights
"""

import torch


def merge_attention(out_a, lse_a, out_b, lse_b):
    lse = torch.logaddexp(lse_a, lse_b)
    out = out_a * torch.exp(lse_b - lse)[..., None] + out_b * torch.exp(lse_a - lse)[..., None]
    return out, lse
