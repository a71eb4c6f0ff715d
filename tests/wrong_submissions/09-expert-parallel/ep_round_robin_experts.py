"""Experts are owned round-robin (expert e on rank e % world_size), not in contiguous blocks.

replaces: ep_forward
fails: test_ep_forward test_ep_forward_more
says: each rank computes only its own experts
"""

import torch


def ep_moe_forward(rank, world_size, moe, x, exchange):
    n = len(moe.experts)
    owner = torch.arange(n) % world_size
    experts, weights = moe.router(x)
    flat = experts.flatten()
    key = owner[flat] * n + flat  # by owner, then by expert
    order = torch.sort(key, stable=True).indices
    token = order // experts.shape[1]
    per_expert = torch.bincount(flat, minlength=n)
    counts = exchange(per_expert.expand(world_size, n).contiguous(), [1] * world_size, [1] * world_size)
    mine = [e for e in range(n) if e % world_size == rank]
    input_splits = [int(per_expert[owner == r].sum()) for r in range(world_size)]
    local = counts[:, mine]
    output_splits = local.sum(1).tolist()
    received = exchange(x[token], output_splits, input_splits)
    pieces = list(received.split(local.flatten().tolist()))
    for j, e in enumerate(mine):
        chunks = [i * len(mine) + j for i in range(world_size)]
        rows = torch.cat([pieces[c] for c in chunks])
        if len(rows):
            results = moe.experts[e](rows).split([len(pieces[c]) for c in chunks])
            for c, result in zip(chunks, results, strict=True):
                pieces[c] = result
    back = exchange(torch.cat(pieces), input_splits, output_splits)
    out = moe.shared(x) if moe.shared is not None else torch.zeros_like(x)
    return out.index_add(0, token, back * weights.flatten()[order, None])
