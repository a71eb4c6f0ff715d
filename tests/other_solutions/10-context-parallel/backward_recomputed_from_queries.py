"""Backward by recomputation, two rings: K and V go round once more to give this rank's dQ; then Q,
dO, lse and D go round, and each owner recomputes the blocks from its keys' side to make its own dK
and dV. No gradient accumulator travels.

replaces: ring_backward
fails: none
"""

import torch
import torch.distributed as dist


def ring_attention_backward(rank, world_size, q, k, v, out, lse, grad_out, layout, causal):
    scale = q.shape[-1] ** -0.5
    d_term = (grad_out * out).sum(-1)
    nxt, prev = (rank + 1) % world_size, (rank - 1) % world_size

    def rows_of(spans):
        offsets, start = [], 0
        for a, b in spans:
            offsets.append(((a, b), slice(start, start + b - a)))
            start += b - a
        return offsets

    def block(q_, k_, v_, lse_, g_, d_, q_span, k_span):
        s = q_ @ k_.transpose(-1, -2) * scale
        if causal and k_span == q_span:
            n = s.shape[-1]
            s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
        p = torch.exp(s - lse_[..., None])
        return p, p * (g_ @ v_.transpose(-1, -2) - d_[..., None])

    def around(tensors, step, holder):  # pass tensors on; receive those of the previous holder
        if step == world_size - 1:
            return tensors
        rows = sum(b - a for a, b in layout[(holder - 1) % world_size])
        incoming = [
            t.new_empty(t.shape[0], rows, t.shape[-1]) if t.dim() == 3 else t.new_empty(t.shape[0], rows)
            for t in tensors
        ]
        works = [dist.isend(t, nxt) for t in tensors] + [dist.irecv(t, prev) for t in incoming]
        for work in works:
            work.wait()
        return incoming

    dq = torch.zeros_like(q)
    kk, vv = k, v
    for step in range(world_size):  # first ring: K and V, for this rank's dQ
        owner = (rank - step) % world_size
        for q_span, qi in rows_of(layout[rank]):
            for k_span, ki in rows_of(layout[owner]):
                if causal and k_span[0] > q_span[0]:
                    continue
                g, d = grad_out[..., qi, :], d_term[..., qi]
                _, ds = block(
                    q[..., qi, :], kk[..., ki, :], vv[..., ki, :], lse[..., qi], g, d, q_span, k_span
                )
                dq[..., qi, :] += ds @ kk[..., ki, :] * scale
        kk, vv = around([kk, vv], step, owner)

    dk, dv = torch.zeros_like(k), torch.zeros_like(v)
    qq, gg, ll, dd = q, grad_out, lse, d_term
    for step in range(world_size):  # second ring: the queries' side, for this rank's dK and dV
        owner = (rank - step) % world_size
        for q_span, qi in rows_of(layout[owner]):
            for k_span, ki in rows_of(layout[rank]):
                if causal and k_span[0] > q_span[0]:
                    continue
                p, ds = block(qq[..., qi, :], k[..., ki, :], v[..., ki, :], ll[..., qi], gg[..., qi, :],
                              dd[..., qi], q_span, k_span)  # fmt: skip
                dv[..., ki, :] += p.transpose(-1, -2) @ gg[..., qi, :]
                dk[..., ki, :] += ds.transpose(-1, -2) @ qq[..., qi, :] * scale
        qq, gg, ll, dd = around([qq, gg, ll, dd], step, owner)
    return dq, dk, dv
