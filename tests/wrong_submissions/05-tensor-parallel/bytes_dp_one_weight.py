"""Counts the gradient of one of the MLP's two weights.

replaces: bytes
fails: test_bytes test_bytes_more
says: count one weight, not both
"""


def dp_mlp_bytes(hidden, p, bytes_per_value):
    return 2 * (p - 1) / p * 4 * hidden * hidden * bytes_per_value


def tp_sends_less_below(hidden):
    return 2 * hidden
