"""Undoes the busbw factor, though the lecture's formulas multiply by it too.

replaces: lecture
fails: test_lecture test_lecture_more
says: undo the busbw factor
"""


def lecture_printed(name: str, busbw: float, world_size: int) -> float:
    n = world_size
    factor = 2 * (n - 1) / n if name == "all_reduce" else (n - 1) / n
    gib = busbw / factor * 1e9 / 2**30
    return gib / n if name == "reduce_scatter" else gib
