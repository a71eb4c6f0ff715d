"""States from a table of (bytes a parameter, first ZeRO stage that shards it).

replaces: states
fails: none
"""


def states_bytes(psi, dp, zero, grad_accumulation):
    table = {"fp32": [(2, None), (4, None), (12, 1)], "bf16": [(2, 3), (2, 2), (12, 1)]}[grad_accumulation]
    return sum(n * psi / (dp if stage is not None and zero >= stage else 1) for n, stage in table)
