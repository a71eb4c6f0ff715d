"""Divides each sharded part with floor division (//), rounding it down to whole bytes: exact when
n divides the bytes, as it does for billions of parameters on 8 devices, wrong when it does not.

replaces: zero_memory
fails: test_zero_memory
says: floor division
"""


def zero_memory(psi, n, stage, optimizer="adamw"):
    if stage not in (0, 1, 2, 3):
        raise ValueError(f"no stage {stage}")
    if n < 1:
        raise ValueError("need at least one device")
    state = {"adamw": 12, "sgd_momentum": 8, "sgd": 4}
    if optimizer not in state:
        raise ValueError(f"unknown optimizer {optimizer!r}")
    parameters = 2 * psi // n if stage >= 3 else 2 * psi
    gradients = 2 * psi // n if stage >= 2 else 2 * psi
    return float(
        parameters + gradients + (state[optimizer] * psi // n if stage >= 1 else state[optimizer] * psi)
    )
