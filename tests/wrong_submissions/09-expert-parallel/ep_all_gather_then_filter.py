"""Every rank gathers every token, computes its own experts on the ones routed to them, and the outputs
are summed by an all_reduce.

replaces: ep_forward
fails: test_ep_forward test_ep_forward_more
says: Gathering every token on every rank
"""

import torch
import torch.distributed as dist


def ep_moe_forward(rank, world_size, moe, x, exchange):
    n = len(moe.experts)
    sizes = [torch.zeros(1, dtype=torch.long) for _ in range(world_size)]
    dist.all_gather(sizes, torch.tensor([len(x)]))
    most = int(max(sizes))
    padded = torch.zeros(most, x.shape[1])
    padded[: len(x)] = x
    gathered = [torch.empty_like(padded) for _ in range(world_size)]
    dist.all_gather(gathered, padded)
    every = torch.cat([g[: int(s)] for g, s in zip(gathered, sizes, strict=True)])
    experts, weights = moe.router(every)
    out = torch.zeros_like(every)
    for e in range(rank * n // world_size, (rank + 1) * n // world_size):
        t, k = (experts == e).nonzero(as_tuple=True)
        if len(t):
            out = out.index_add(0, t, weights[t, k, None] * moe.experts[e](every[t]))
    dist.all_reduce(out)
    start = int(sum(sizes[:rank]))
    mine = out[start : start + len(x)]
    return mine + (moe.shared(x) if moe.shared is not None else 0)
