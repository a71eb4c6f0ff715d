"""Merges with exponentials of the log-sum-exps themselves, never subtracting the running maximum:
right for small scores, overflowing for scores near 1e3.

replaces: ring
fails: test_ring_more
says: keep a running maximum
"""

import torch
import torch.distributed as dist


def raw_merge(out_a, lse_a, out_b, lse_b):
    a, b = torch.exp(lse_a), torch.exp(lse_b)
    return (out_a * a[..., None] + out_b * b[..., None]) / (a + b)[..., None], torch.log(a + b)


def ring_attention(rank, world_size, q, k, v, layout, causal):
    def pieces(x, spans):
        return x.split([b - a for a, b in spans], dim=-2)

    mine = layout[rank]
    outs = [torch.zeros_like(p) for p in pieces(q, mine)]
    lses = [torch.full(p.shape[:-1], float("-inf"), dtype=q.dtype) for p in pieces(q, mine)]
    nxt, prev = (rank + 1) % world_size, (rank - 1) % world_size
    for step in range(world_size):
        owner = (rank - step) % world_size
        theirs = layout[owner]
        if step < world_size - 1:
            rows = sum(b - a for a, b in layout[(owner - 1) % world_size])
            next_k, next_v = (
                k.new_empty(k.shape[0], rows, k.shape[-1]),
                v.new_empty(v.shape[0], rows, v.shape[-1]),
            )
            reqs = [
                dist.isend(k, nxt),
                dist.isend(v, nxt),
                dist.irecv(next_k, prev),
                dist.irecv(next_v, prev),
            ]
        for i, (qs, qp) in enumerate(zip(mine, pieces(q, mine), strict=True)):
            for ks, kp, vp in zip(theirs, pieces(k, theirs), pieces(v, theirs), strict=True):
                if causal and ks[0] > qs[0]:
                    continue
                out, lse = attend(qp, kp, vp, causal and ks == qs)  # noqa: F821 - a locked cell defines it
                outs[i], lses[i] = raw_merge(outs[i], lses[i], out, lse)  # noqa: F821
        if step < world_size - 1:
            for r in reqs:
                r.wait()
            k, v = next_k, next_v
    return torch.cat(outs, dim=-2), torch.cat(lses, dim=-1)
