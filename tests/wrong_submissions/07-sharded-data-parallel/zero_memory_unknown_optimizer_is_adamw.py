"""Right for the three optimizers, but counts any other name as AdamW instead of refusing it.

replaces: zero_memory
fails: test_zero_memory
says: 'lion'
"""


def zero_memory(psi, n, stage, optimizer="adamw"):
    if stage not in (0, 1, 2, 3) or n < 1:
        raise ValueError("no such stage, or no devices")
    k = {"sgd_momentum": 8, "sgd": 4}.get(optimizer, 12)
    return (
        2 * psi / (n if stage >= 3 else 1)
        + 2 * psi / (n if stage >= 2 else 1)
        + k * psi / (n if stage >= 1 else 1)
    )
