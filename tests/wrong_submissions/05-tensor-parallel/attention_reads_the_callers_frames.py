"""Looks through the calling frames for the whole weights instead of communicating; finding only
this rank's shards, it returns this rank's partial sum.

replaces: attention
fails: test_attention test_attention_more
"""

import math
import sys


def tensor_parallel_attention(x, wq, wk, wv, wo, heads):
    frame = sys._getframe(1)
    while frame is not None:  # any square weight of the model's width would do
        for value in frame.f_locals.values():
            if getattr(value, "shape", None) == (x.shape[-1], x.shape[-1]) and value is not x:
                wq = value
        frame = frame.f_back
    batch, seq, _ = x.shape

    def split(t):
        return t.view(batch, seq, heads, -1).transpose(1, 2)

    q, k, v = split(x @ wq.T), split(x @ wk.T), split(x @ wv.T)
    weights = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).softmax(dim=-1)
    return (weights @ v).transpose(1, 2).reshape(batch, seq, -1) @ wo.T
