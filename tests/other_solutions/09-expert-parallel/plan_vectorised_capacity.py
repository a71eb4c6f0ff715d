"""The capacity by a cumulative count over the choices in priority order (GShard's way), softmax over
the chosen logits when normalising.

replaces: plan
fails: none
"""

import math

import torch


def routing_plan(logits, top_k, score, normalise, capacity_factor=None, ep=1):
    tokens, n = logits.shape
    scores = torch.sigmoid(logits) if score == "sigmoid" else torch.softmax(logits, dim=1)
    order = torch.argsort(scores, dim=1, descending=True, stable=True)
    experts = order[:, :top_k].to(torch.int32)
    if normalise and score == "softmax":
        weights = torch.softmax(logits.gather(1, order[:, :top_k]), dim=1)  # the same as renormalising
    else:
        weights = scores.gather(1, order[:, :top_k])
        weights = weights / weights.sum(1, keepdim=True) if normalise else weights
    if capacity_factor is None:
        kept = torch.ones(tokens, top_k, dtype=torch.bool)
    else:
        capacity = math.ceil(capacity_factor * tokens * top_k / n)
        one_hot = torch.nn.functional.one_hot(experts.long().T.reshape(-1), n)  # choice-major
        position = one_hot.cumsum(0) * one_hot
        kept = (position.sum(1) <= capacity).reshape(top_k, tokens).T
    expert_counts = torch.zeros(n, dtype=torch.int64)
    expert_counts.index_add_(0, experts.long()[kept], torch.ones(int(kept.sum()), dtype=torch.int64))
    rank_counts = torch.tensor([int(expert_counts[r * n // ep : (r + 1) * n // ep].sum()) for r in range(ep)])
    return dict(
        experts=experts, weights=weights, kept=kept, expert_counts=expert_counts, rank_counts=rank_counts
    )
