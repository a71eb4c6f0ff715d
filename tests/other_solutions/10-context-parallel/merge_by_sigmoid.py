"""Weighs side a by sigmoid(lse_a - lse_b), which is its share of the two sums.

replaces: merge
fails: none
"""

import torch


def merge_attention(out_a, lse_a, out_b, lse_b):
    w = torch.sigmoid(lse_a - lse_b).unsqueeze(-1)
    return w * out_a + (1 - w) * out_b, torch.logaddexp(lse_a, lse_b)
