"""Clips by the norm of this rank's own shards: every rank its own norm, none the global one.

replaces: clip
fails: test_clip test_clip_more
says: take the norm of this rank's shard only
"""

import torch


def clip_sharded_(grad_shards, max_norm):
    norm = torch.cat([g.reshape(-1) for g in grad_shards]).norm().item() if grad_shards else 0.0
    factor = max_norm / (norm + 1e-6)
    if factor < 1:
        for g in grad_shards:
            g.mul_(factor)
    return norm
