"""Right for stages 0, 1 and 3, but keeps the gradients whole in stage 2, as stage 1 does.

replaces: zero_memory
fails: test_zero_memory
says: give stage 2 what stage 1 keeps
"""


def zero_memory(psi, n, stage, optimizer="adamw"):
    if stage not in (0, 1, 2, 3) or n < 1:
        raise ValueError("no such stage, or no devices")
    if optimizer not in ("adamw", "sgd_momentum", "sgd"):
        raise ValueError(f"unknown optimizer {optimizer!r}")
    k = {"adamw": 12, "sgd_momentum": 8, "sgd": 4}[optimizer]
    return (
        2 * psi / (n if stage >= 3 else 1)
        + 2 * psi / (n if stage >= 3 else 1)
        + k * psi / (n if stage >= 1 else 1)
    )
