"""Right for stages 0 to 3, but takes any other stage (or no devices) without complaint.

replaces: zero_memory
fails: test_zero_memory
says: there is no stage 4
"""


def zero_memory(psi, n, stage, optimizer="adamw"):
    k = {"adamw": 12, "sgd_momentum": 8, "sgd": 4}[optimizer]
    return (
        2 * psi / (n if stage >= 3 else 1)
        + 2 * psi / (n if stage >= 2 else 1)
        + k * psi / (n if stage >= 1 else 1)
    )
