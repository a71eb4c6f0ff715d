"""Reads formula A's figures as GB/s, though the code divides by 1024**3.

replaces: lecture
fails: test_lecture
"""


def lecture_busbw(reported: float, formula: str, name: str, world_size: int, counted: str = "input") -> float:
    n = world_size
    multiplier = 2 if name == "all_reduce" else 1
    if formula == "A":
        counted_per_second = reported * 1e9 / (multiplier * n)
    else:
        counted_per_second = reported * 1e9 * n / multiplier
    whole_per_second = counted_per_second * (n if counted == "output" and name == "reduce_scatter" else 1)
    factor = 2 * (n - 1) / n if name == "all_reduce" else (n - 1) / n
    return whole_per_second * factor / 1e9
