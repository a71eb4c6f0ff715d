"""Forgets the 1/sqrt(d) of the scores in dQ and dK.

replaces: ring_backward
fails: test_ring_backward test_ring_backward_more
says: forget the 1/sqrt(d) scale
"""

_backward = ring_attention_backward  # noqa: F821 - the solution cell above defines it


def ring_attention_backward(rank, world_size, q, k, v, out, lse, grad_out, layout, causal):
    dq, dk, dv = _backward(rank, world_size, q, k, v, out, lse, grad_out, layout, causal)
    scale = q.shape[-1] ** 0.5
    return dq * scale, dk * scale, dv
