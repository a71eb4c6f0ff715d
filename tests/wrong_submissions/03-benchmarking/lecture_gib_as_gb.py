"""Takes the lecture's figures for GB/s, though its code divides by 2**30.

replaces: lecture
fails: test_lecture test_lecture_more
says: print busbw in GB
"""


def lecture_printed(name: str, busbw: float, world_size: int) -> float:
    return busbw / world_size if name == "reduce_scatter" else busbw
