"""Counts 16 bytes of Adam state per parameter (K=16) instead of 12.

replaces: zero_memory
fails: test_zero_memory
says: (K=16)
"""


def zero_memory(psi, n, stage, optimizer="adamw"):
    k = {"adamw": 12, "sgd_momentum": 8, "sgd": 4}[optimizer]
    if stage not in (0, 1, 2, 3) or n < 1:
        raise ValueError("no such stage, or no devices")
    return (
        2 * psi / (n if stage >= 3 else 1)
        + 2 * psi / (n if stage >= 2 else 1)
        + (k + 4) * psi / (n if stage >= 1 else 1)
    )
