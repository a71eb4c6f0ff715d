"""Every rank pads each destination's rows to the most any rank sends, and exchanges equal splits with
expert ids beside the rows.

replaces: ep_forward
fails: test_ep_forward test_ep_forward_more
says: Equal splits were assumed
"""

import torch
import torch.distributed as dist


def ep_moe_forward(rank, world_size, moe, x, exchange):
    n = len(moe.experts)
    first = [r * n // world_size for r in range(world_size + 1)]
    experts, weights = moe.router(x)
    most = torch.tensor([len(x) * experts.shape[1]])
    dist.all_reduce(most, op=dist.ReduceOp.MAX)
    p = int(most)
    rows = torch.zeros(world_size * p, x.shape[1])
    ids = torch.full((world_size * p,), -1, dtype=torch.long)
    where = []
    fill = [0] * world_size
    for t in range(len(x)):
        for k in range(experts.shape[1]):
            e = int(experts[t, k])
            r = next(r for r in range(world_size) if first[r] <= e < first[r + 1])
            slot = r * p + fill[r]
            fill[r] += 1
            rows[slot], ids[slot] = x[t], e
            where.append((slot, t, k))
    received = exchange(rows, [p] * world_size, [p] * world_size)
    got_ids = exchange(ids, [p] * world_size, [p] * world_size)
    results = torch.zeros_like(received)
    for e in range(first[rank], first[rank + 1]):
        mask = got_ids == e
        if mask.any():
            results[mask] = moe.experts[e](received[mask])
    back = exchange(results, [p] * world_size, [p] * world_size)
    out = moe.shared(x) if moe.shared is not None else torch.zeros_like(x)
    for slot, t, k in where:
        out = out.index_add(0, torch.tensor([t]), (weights[t, k] * back[slot])[None])
    return out
