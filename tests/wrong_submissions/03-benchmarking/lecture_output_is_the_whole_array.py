"""Treats a counted reduce_scatter output as if it were the whole array.

replaces: lecture
fails: test_lecture
"""


def lecture_busbw(reported: float, formula: str, name: str, world_size: int, counted: str = "input") -> float:
    n = world_size
    multiplier = 2 if name == "all_reduce" else 1
    if formula == "A":
        counted_per_second = reported * 2**30 / (multiplier * n)
    else:
        counted_per_second = reported * 1e9 * n / multiplier
    factor = 2 * (n - 1) / n if name == "all_reduce" else (n - 1) / n
    return counted_per_second * factor / 1e9
