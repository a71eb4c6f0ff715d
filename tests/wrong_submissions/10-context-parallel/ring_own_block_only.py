"""Passes the blocks around the ring but merges only its own block into the output.

replaces: ring
fails: test_ring test_ring_more
says: attend only to this rank's own keys
"""

import torch
import torch.distributed as dist


def ring_attention(rank, world_size, q, k, v, layout, causal):
    own_k, own_v = k, v
    nxt, prev = (rank + 1) % world_size, (rank - 1) % world_size
    for step in range(world_size - 1):  # the blocks travel first, and are dropped
        owner = (rank - step) % world_size
        rows = sum(b - a for a, b in layout[(owner - 1) % world_size])
        nk, nv = k.new_empty(k.shape[0], rows, k.shape[-1]), v.new_empty(v.shape[0], rows, v.shape[-1])
        reqs = [dist.isend(k, nxt), dist.isend(v, nxt), dist.irecv(nk, prev), dist.irecv(nv, prev)]
        for r in reqs:
            r.wait()
        k, v = nk, nv
    mine = layout[rank]
    sizes = [b - a for a, b in mine]
    outs, lses = [], []
    for _i, (qs, qp) in enumerate(zip(mine, q.split(sizes, dim=-2), strict=True)):
        out = torch.zeros_like(qp)
        lse = torch.full(qp.shape[:-1], float("-inf"), dtype=q.dtype)
        for ks, kp, vp in zip(mine, own_k.split(sizes, dim=-2), own_v.split(sizes, dim=-2), strict=True):
            if causal and ks[0] > qs[0]:
                continue
            o, s = attend(qp, kp, vp, causal and ks == qs)  # noqa: F821 - a locked cell defines it
            out, lse = merge_attention(out, lse, o, s)  # noqa: F821
        outs.append(out)
        lses.append(lse)
    return torch.cat(outs, dim=-2), torch.cat(lses, dim=-1)
