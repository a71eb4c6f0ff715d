"""Averages the two partial outputs, as if both sides had the same denominator.

replaces: merge
fails: test_merge test_merge_more
says: average the two outputs
"""

import torch


def merge_attention(out_a, lse_a, out_b, lse_b):
    return (out_a + out_b) / 2, torch.logaddexp(lse_a, lse_b)
