"""The capacity is applied to each EP rank's experts together, not to each expert.

replaces: plan
fails: test_plan test_plan_more
says: the capacity applied to each EP rank's experts together
"""

import math

import torch


def routing_plan(logits, top_k, score, normalise, capacity_factor=None, ep=1):
    tokens, n = logits.shape
    scores = logits.softmax(-1) if score == "softmax" else logits.sigmoid()
    experts = torch.sort(scores, dim=-1, descending=True, stable=True).indices[:, :top_k]
    weights = scores.gather(-1, experts)
    if normalise:
        weights = weights / weights.sum(-1, keepdim=True)
    kept = torch.ones(tokens, top_k, dtype=torch.bool)
    if capacity_factor is not None:
        capacity = math.ceil(capacity_factor * tokens * top_k / n)
        used = [0] * ep
        for t, k in [(t, k) for k in range(top_k) for t in range(tokens)]:
            e = int(experts[t, k])
            where = next(r for r in range(ep) if r * n // ep <= e < (r + 1) * n // ep)
            kept[t, k] = used[where] < capacity * ((where + 1) * n // ep - where * n // ep)
            used[where] += int(kept[t, k])
    pass
    expert_counts = torch.bincount(experts[kept], minlength=n)
    rank_counts = torch.stack([expert_counts[r * n // ep : (r + 1) * n // ep].sum() for r in range(ep)])
    return {
        "experts": experts,
        "weights": weights,
        "kept": kept,
        "expert_counts": expert_counts,
        "rank_counts": rank_counts,
    }
