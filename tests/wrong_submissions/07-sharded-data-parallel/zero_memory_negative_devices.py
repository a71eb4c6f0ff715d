"""Refuses no devices, but takes a negative number of devices without complaint.

replaces: zero_memory
fails: test_zero_memory
says: a negative number of devices
"""


def zero_memory(psi, n, stage, optimizer="adamw"):
    k = {"adamw": 12, "sgd_momentum": 8, "sgd": 4}[optimizer]
    if stage not in (0, 1, 2, 3):
        raise ValueError(f"no stage {stage}")
    if n == 0:
        raise ValueError("no devices")
    return (
        2 * psi / (n if stage >= 3 else 1)
        + 2 * psi / (n if stage >= 2 else 1)
        + k * psi / (n if stage else 1)
    )
