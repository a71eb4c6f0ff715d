"""Counts only each optimizer's running statistics as its state: plain SGD keeps nothing, SGD with
momentum 4 bytes, as if the fp32 master copy belonged to AdamW alone.

replaces: zero_memory
fails: test_zero_memory
says: master copy
"""


def zero_memory(psi, n, stage, optimizer="adamw"):
    if stage not in (0, 1, 2, 3) or n < 1:
        raise ValueError("no such stage, or no devices")
    if optimizer not in ("adamw", "sgd_momentum", "sgd"):
        raise ValueError(f"unknown optimizer {optimizer!r}")
    k = {"adamw": 12, "sgd_momentum": 4, "sgd": 0}[optimizer]
    return (
        2 * psi / (n if stage >= 3 else 1)
        + 2 * psi / (n if stage >= 2 else 1)
        + k * psi / (n if stage >= 1 else 1)
    )
