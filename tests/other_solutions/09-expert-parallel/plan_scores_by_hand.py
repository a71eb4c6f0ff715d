"""Scores computed by hand (a sigmoid as 1 / (1 + e^-x), a softmax as exponentials over their sum),
the top-k by a stable argsort, the capacity by counting per expert over a priority list.

replaces: plan
fails: none
"""

import math

import torch


def routing_plan(logits, top_k, score, normalise, capacity_factor=None, ep=1):
    tokens, n = logits.shape
    if score == "sigmoid":
        scores = 1 / (1 + torch.exp(-logits))
    else:
        e = torch.exp(logits - logits.max(dim=-1, keepdim=True).values)
        scores = e / e.sum(dim=-1, keepdim=True)
    experts = torch.argsort(-scores, dim=-1, stable=True)[:, :top_k]
    weights = torch.gather(scores, 1, experts)
    if normalise:
        weights = weights / weights.sum(dim=1, keepdim=True)
    kept = torch.ones_like(experts, dtype=torch.bool)
    if capacity_factor is not None:
        room = {e: math.ceil(capacity_factor * tokens * top_k / n) for e in range(n)}
        for choice in range(top_k):
            for t in range(tokens):
                e = experts[t, choice].item()
                if room[e] > 0:
                    room[e] -= 1
                else:
                    kept[t, choice] = False
    expert_counts = torch.tensor([int(((experts == e) & kept).sum()) for e in range(n)])
    owners = [r for r in range(ep) for _ in range(r * n // ep, (r + 1) * n // ep)]
    rank_counts = torch.zeros(ep, dtype=torch.long)
    for e, count in enumerate(expert_counts.tolist()):
        rank_counts[owners[e]] += count
    return {
        "experts": experts,
        "weights": weights,
        "kept": kept,
        "expert_counts": expert_counts,
        "rank_counts": rank_counts,
    }
