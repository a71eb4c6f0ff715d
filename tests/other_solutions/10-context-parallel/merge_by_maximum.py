"""Merges with the running maximum and the sums written out, as FlashAttention's online softmax does.

replaces: merge
fails: none
"""

import torch


def merge_attention(out_a, lse_a, out_b, lse_b):
    m = torch.maximum(lse_a, lse_b)  # finite: at least one side has seen a key
    a, b = torch.exp(lse_a - m), torch.exp(lse_b - m)
    total = a + b
    out = (out_a * a.unsqueeze(-1) + out_b * b.unsqueeze(-1)) / total.unsqueeze(-1)
    return out, m + torch.log(total)
