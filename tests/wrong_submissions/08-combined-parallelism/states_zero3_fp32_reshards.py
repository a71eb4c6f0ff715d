"""With fp32 accumulation, ZeRO-3 keeps only a shard of the parameters, though Llama 3 keeps them whole.

replaces: states
fails: test_states_more
says: keeps the gathered parameters whole through the step
"""


def states_bytes(psi, dp, zero, grad_accumulation):
    if grad_accumulation == "fp32":
        return 2 * psi / (dp if zero >= 3 else 1) + 4 * psi + 12 * psi / (dp if zero >= 1 else 1)
    return (
        2 * psi / (dp if zero >= 3 else 1)
        + 2 * psi / (dp if zero >= 2 else 1)
        + 12 * psi / (dp if zero >= 1 else 1)
    )
