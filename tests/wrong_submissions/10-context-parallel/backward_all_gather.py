"""Gathers every rank's K and V with all_gather and differentiates attention over the whole sequence.

replaces: ring_backward
fails: test_ring_backward test_ring_backward_more
says: pass blocks around the ring with isend and irecv only
"""

import torch
import torch.distributed as dist


def ring_attention_backward(rank, world_size, q, k, v, out, lse, grad_out, layout, causal):
    rows = [sum(b - a for a, b in spans) for spans in layout]
    longest = max(rows)  # Gloo gathers tensors of one size: pad, then cut
    ks = [k.new_empty(k.shape[0], longest, k.shape[-1]) for _ in rows]
    vs = [v.new_empty(v.shape[0], longest, v.shape[-1]) for _ in rows]
    pad = longest - k.shape[-2]
    dist.all_gather(ks, torch.nn.functional.pad(k, (0, 0, 0, pad)).contiguous())
    dist.all_gather(vs, torch.nn.functional.pad(v, (0, 0, 0, pad)).contiguous())
    ks = [x[..., :n, :] for x, n in zip(ks, rows, strict=True)]
    vs = [x[..., :n, :] for x, n in zip(vs, rows, strict=True)]
    positions = torch.tensor([p for spans in layout for a, b in spans for p in range(a, b)])
    mine = torch.tensor([p for a, b in layout[rank] for p in range(a, b)])
    q = q.clone().requires_grad_()
    k_all = torch.cat(ks, dim=-2).requires_grad_()
    v_all = torch.cat(vs, dim=-2).requires_grad_()
    scores = q @ k_all.transpose(-1, -2) / q.shape[-1] ** 0.5
    if causal:
        scores = scores.masked_fill(positions[None, :] > mine[:, None], float("-inf"))
    result = torch.softmax(scores, -1) @ v_all
    dq, dk_all, dv_all = torch.autograd.grad(result, (q, k_all, v_all), grad_out)
    dist.all_reduce(dk_all)
    dist.all_reduce(dv_all)
    start = sum(rows[:rank])
    return dq, dk_all[..., start : start + rows[rank], :], dv_all[..., start : start + rows[rank], :]
