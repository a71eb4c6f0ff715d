"""Counts tensor parallelism's forward all_reduce but not the backward one.

replaces: bytes
fails: test_bytes test_bytes_more
says: count the forward pass only
"""


def tp_mlp_bytes(tokens, hidden, p, bytes_per_value):
    return 2 * (p - 1) / p * tokens * hidden * bytes_per_value


def tp_sends_less_below(hidden):
    return 8 * hidden
