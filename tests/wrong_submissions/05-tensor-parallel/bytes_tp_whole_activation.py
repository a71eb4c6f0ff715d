"""Counts the whole activation for each all_reduce, as if every GPU sent all of it twice.

replaces: bytes
fails: test_bytes test_bytes_more
says: what each GPU sends in a ring
"""


def tp_mlp_bytes(tokens, hidden, p, bytes_per_value):
    return 2 * 2 * tokens * hidden * bytes_per_value
