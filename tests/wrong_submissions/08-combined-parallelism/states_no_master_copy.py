"""Forgets the fp32 master copy: AdamW's two moments only, 8 bytes a parameter.

replaces: states
fails: test_states test_states_more
says: master copy
"""


def states_bytes(psi, dp, zero, grad_accumulation):
    optimizer = 8 * psi / (dp if zero >= 1 else 1)
    if grad_accumulation == "fp32":
        return 6 * psi + optimizer
    return 2 * psi / (dp if zero >= 3 else 1) + 2 * psi / (dp if zero >= 2 else 1) + optimizer
