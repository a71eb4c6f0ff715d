"""Looks up, per stage, which of the three kinds of state are divided by n, and per optimizer, the
bytes of its state.

replaces: zero_memory
fails: none
"""

SHARDED = {
    0: (),
    1: ("optimizer",),
    2: ("optimizer", "gradients"),
    3: ("optimizer", "gradients", "parameters"),
}
# fp32 master copy, then each running statistic in fp32
STATE = {"adamw": [4, 4, 4], "sgd_momentum": [4, 4], "sgd": [4]}


def zero_memory(psi, n, stage, optimizer="adamw"):
    if stage not in SHARDED:
        raise ValueError(f"unknown ZeRO stage {stage}")
    if n <= 0:
        raise ValueError("n must be a positive number of devices")
    if optimizer not in STATE:
        raise ValueError(f"unknown optimizer {optimizer}")
    sizes = {"parameters": 2, "gradients": 2, "optimizer": sum(STATE[optimizer])}
    return float(sum(psi * b / (n if kind in SHARDED[stage] else 1) for kind, b in sizes.items()))
