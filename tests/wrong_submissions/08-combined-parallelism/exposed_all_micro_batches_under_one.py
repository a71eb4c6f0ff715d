"""Sets every micro-batch's FSDP collectives against one micro-batch's work.

replaces: exposed
fails: test_exposed_more
says: each micro-batch's collectives are prefetched under that micro-batch's work
"""


def exposed_dp(reduce, gather, per_micro_batch, forward, backward, micro_batches):
    return (
        max(0.0, reduce - backward)
        + max(0.0, gather - forward)
        + max(0.0, per_micro_batch - forward - backward)
    )
