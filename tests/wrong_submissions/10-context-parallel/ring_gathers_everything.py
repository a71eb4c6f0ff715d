"""Passes K and V around the ring, but keeps every block and computes attention over them all at once.

replaces: ring
fails: test_ring test_ring_more
says: gathered K or V of several ranks
"""

import torch
import torch.distributed as dist


def ring_attention(rank, world_size, q, k, v, layout, causal):
    keys, values = {rank: k}, {rank: v}
    nxt, prev = (rank + 1) % world_size, (rank - 1) % world_size
    for step in range(world_size - 1):
        owner = (rank - step) % world_size
        rows = sum(b - a for a, b in layout[(owner - 1) % world_size])
        next_k, next_v = (
            k.new_empty(k.shape[0], rows, k.shape[-1]),
            v.new_empty(v.shape[0], rows, v.shape[-1]),
        )
        reqs = [dist.isend(keys[owner], nxt), dist.isend(values[owner], nxt)]
        reqs += [dist.irecv(next_k, prev), dist.irecv(next_v, prev)]
        for r in reqs:
            r.wait()
        keys[(owner - 1) % world_size], values[(owner - 1) % world_size] = next_k, next_v
    positions = torch.tensor([p for r in range(world_size) for a, b in layout[r] for p in range(a, b)])
    mine = torch.tensor([p for a, b in layout[rank] for p in range(a, b)])
    k_all = torch.cat([keys[r] for r in range(world_size)], dim=-2)
    v_all = torch.cat([values[r] for r in range(world_size)], dim=-2)
    scores = q @ k_all.transpose(-1, -2) / q.shape[-1] ** 0.5
    if causal:
        scores = scores.masked_fill(positions[None, :] > mine[:, None], float("-inf"))
    lse = torch.logsumexp(scores, -1)
    return torch.exp(scores - lse[..., None]) @ v_all, lse
