"""Counts the lecture's all_gathers but not the reduce_scatters of its backward pass.

replaces: bytes
fails: test_bytes_allgather
says: count the forward pass only
"""


def allgather_mlp_bytes(tokens, hidden, p, bytes_per_value):
    return (p - 1) / p * tokens * 5 * hidden * bytes_per_value
