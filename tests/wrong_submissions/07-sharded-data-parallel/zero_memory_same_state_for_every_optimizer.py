"""Takes the optimizer, checks its name, and counts AdamW's 12 bytes of state for every one.

replaces: zero_memory
fails: test_zero_memory
says: AdamW's 12 bytes
"""


def zero_memory(psi, n, stage, optimizer="adamw"):
    if stage not in (0, 1, 2, 3) or n < 1:
        raise ValueError("no such stage, or no devices")
    if optimizer not in ("adamw", "sgd_momentum", "sgd"):
        raise ValueError(f"unknown optimizer {optimizer!r}")
    return (
        2 * psi / (n if stage >= 3 else 1)
        + 2 * psi / (n if stage >= 2 else 1)
        + 12 * psi / (n if stage >= 1 else 1)
    )
