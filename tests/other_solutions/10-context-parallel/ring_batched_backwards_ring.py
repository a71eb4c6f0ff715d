"""K and V stacked into one tensor, sent with batch_isend_irecv, around the ring the other way
(to the previous rank); positions masked per pair with a boolean mask built from the layout.

replaces: ring
fails: none
"""

import torch
import torch.distributed as dist


def ring_attention(rank, world_size, q, k, v, layout, causal):
    def positions(spans):
        return torch.tensor([p for a, b in spans for p in range(a, b)])

    def pieces(x, spans):
        return x.split([b - a for a, b in spans], dim=-2)

    mine = layout[rank]
    out = torch.zeros_like(q)
    lse = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype)
    kv = torch.stack([k, v])
    to, frm = (rank - 1) % world_size, (rank + 1) % world_size
    for step in range(world_size):
        owner = (rank + step) % world_size
        if step < world_size - 1:
            rows = sum(b - a for a, b in layout[(owner + 1) % world_size])
            incoming = kv.new_empty(2, kv.shape[1], rows, kv.shape[-1])
            works = dist.batch_isend_irecv(
                [dist.P2POp(dist.isend, kv, to), dist.P2POp(dist.irecv, incoming, frm)]
            )
        outs, lses = list(pieces(out, mine)), list(pieces(lse[..., None], mine))
        for i, (q_span, q_piece) in enumerate(zip(mine, pieces(q, mine), strict=True)):
            for k_span, k_piece, v_piece in zip(
                layout[owner], pieces(kv[0], layout[owner]), pieces(kv[1], layout[owner]), strict=True
            ):
                if causal and k_span[0] > q_span[0]:
                    continue
                scores = q_piece @ k_piece.transpose(-1, -2) / q.shape[-1] ** 0.5
                if causal:
                    hidden = positions([k_span])[None, :] > positions([q_span])[:, None]
                    scores = scores.masked_fill(hidden, float("-inf"))
                block_lse = torch.logsumexp(scores, -1)
                block_out = torch.exp(scores - block_lse[..., None]) @ v_piece
                merged, merged_lse = merge_attention(outs[i], lses[i][..., 0], block_out, block_lse)  # noqa: F821
                outs[i], lses[i] = merged, merged_lse[..., None]
        out, lse = torch.cat(outs, dim=-2), torch.cat(lses, dim=-2)[..., 0]
        if step < world_size - 1:
            for work in works:
                work.wait()
            kv = incoming
    return out, lse
