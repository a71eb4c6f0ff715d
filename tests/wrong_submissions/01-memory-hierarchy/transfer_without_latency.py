"""Leaves the latency out of the transfer time.

replaces: moving_bytes
fails: test_transfer
says: leave out the latency
"""


def transfer_time(num_bytes: float, bandwidth: float, latency: float) -> float:
    return num_bytes / bandwidth
