"""Weighs the outputs rightly but returns the larger log-sum-exp, not the log of both sums.

replaces: merge
fails: test_merge test_merge_more
says: keep the larger log-sum-exp
"""

import torch


def merge_attention(out_a, lse_a, out_b, lse_b):
    lse = torch.logaddexp(lse_a, lse_b)
    out = out_a * torch.exp(lse_a - lse)[..., None] + out_b * torch.exp(lse_b - lse)[..., None]
    return out, torch.maximum(lse_a, lse_b)
