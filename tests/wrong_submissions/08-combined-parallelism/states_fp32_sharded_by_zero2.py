"""Shards the fp32 accumulators from ZeRO-2 on, though they are kept whole until the step's reduction.

replaces: states
fails: test_states test_states_more
says: no ZeRO stage shards them
"""


def states_bytes(psi, dp, zero, grad_accumulation):
    gradient = 4 if grad_accumulation == "fp32" else 2
    return (
        2 * psi / (dp if zero >= 3 else 1)
        + gradient * psi / (dp if zero >= 2 else 1)
        + 12 * psi / (dp if zero >= 1 else 1)
    )
