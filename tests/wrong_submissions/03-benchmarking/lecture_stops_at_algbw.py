"""Undoes the lecture's formula but stops at algbw, leaving out the busbw factor.

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
    return counted_per_second * (n if counted == "output" and name == "reduce_scatter" else 1) / 1e9
