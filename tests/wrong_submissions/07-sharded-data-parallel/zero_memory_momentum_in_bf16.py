"""Keeps SGD's momentum in bf16, like the parameters it updates (2 bytes, not 4).

replaces: zero_memory
fails: test_zero_memory
says: momentum in bf16
"""


def zero_memory(psi, n, stage, optimizer="adamw"):
    if stage not in (0, 1, 2, 3) or n < 1:
        raise ValueError("no such stage, or no devices")
    if optimizer not in ("adamw", "sgd_momentum", "sgd"):
        raise ValueError(f"unknown optimizer {optimizer!r}")
    k = {"adamw": 4 + 4 + 4, "sgd_momentum": 4 + 2, "sgd": 4}[optimizer]
    return (
        2 * psi / (n if stage >= 3 else 1)
        + 2 * psi / (n if stage >= 2 else 1)
        + k * psi / (n if stage >= 1 else 1)
    )
