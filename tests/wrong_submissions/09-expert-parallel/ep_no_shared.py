"""The shared expert's output is left out.

replaces: ep_forward
fails: test_ep_forward test_ep_forward_more
says: leave out the shared expert
"""

import torch


def ep_moe_forward(rank, world_size, moe, x, exchange):
    n = len(moe.experts)
    first = [r * n // world_size for r in range(world_size + 1)]
    mine = range(first[rank], first[rank + 1])
    experts, weights = moe.router(x)
    flat = experts.flatten()
    order = torch.sort(flat, stable=True).indices
    token = order // experts.shape[1]
    per_expert = torch.bincount(flat, minlength=n)
    counts = exchange(per_expert.expand(world_size, n).contiguous(), [1] * world_size, [1] * world_size)
    input_splits = [int(per_expert[first[r] : first[r + 1]].sum()) for r in range(world_size)]
    local = counts[:, first[rank] : first[rank + 1]]
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
    out = torch.zeros_like(x)
    return out.index_add(0, token, back * weights.flatten()[order, None])
