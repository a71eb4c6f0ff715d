"""Uses 07's table (bf16 gradients) for fp32 accumulation too.

replaces: states
fails: test_states test_states_more
says: 07's table is for bf16 gradients
"""


def states_bytes(psi, dp, zero, grad_accumulation):
    return (
        2 * psi / (dp if zero >= 3 else 1)
        + 2 * psi / (dp if zero >= 2 else 1)
        + 12 * psi / (dp if zero >= 1 else 1)
    )
