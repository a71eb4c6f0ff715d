"""Subtracts the cover from each collective without stopping at zero, so short ones take time away.

replaces: exposed
fails: test_exposed test_exposed_more
says: it takes nothing away either
"""


def exposed_dp(reduce, gather, per_micro_batch, forward, backward, micro_batches):
    return (reduce - backward) + (gather - forward) + (per_micro_batch - micro_batches * (forward + backward))
