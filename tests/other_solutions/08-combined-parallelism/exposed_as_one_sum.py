"""Each kind's excess over its cover, with the m micro-batches' collectives set against m micro-batches'
work at once (the same, as every micro-batch is alike).

replaces: exposed
fails: none
"""


def exposed_dp(reduce, gather, per_micro_batch, forward, backward, micro_batches):
    covers = [(reduce, backward), (gather, forward), (per_micro_batch, micro_batches * (forward + backward))]
    return float(sum(max(0.0, seconds - cover) for seconds, cover in covers))
