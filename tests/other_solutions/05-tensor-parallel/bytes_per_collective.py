"""Adds up the collectives one by one, as ring all_gathers and reduce_scatters of the two outputs.

replaces: bytes
fails: none
"""


def _ring_share(values, p):
    return values * (p - 1) / p  # what each GPU sends in a ring all_gather or reduce_scatter


def allgather_mlp_bytes(tokens, hidden, p, bytes_per_value):
    widths = (4 * hidden, hidden)  # fc1's output, then fc2's
    forward = sum(_ring_share(tokens * width, p) for width in widths)
    backward = sum(_ring_share(tokens * width, p) for width in widths)
    return (forward + backward) * bytes_per_value
