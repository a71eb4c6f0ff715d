"""Hides ZeRO's gather of the updated parameters under a backward, though the first forward needs them.

replaces: exposed
fails: test_exposed test_exposed_more
says: the gather hides under that forward
"""


def exposed_dp(reduce, gather, per_micro_batch, forward, backward, micro_batches):
    each = per_micro_batch / micro_batches
    return (
        max(0.0, reduce - backward)
        + max(0.0, gather - backward)
        + micro_batches * max(0.0, each - forward - backward)
    )
